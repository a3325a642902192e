// Synthetic files against real DeepSpeed files of the same configuration (tests/data/deepspeed):
// the same pickle structure (keys in order, nesting, Python types, GLOBALs, tensor dtypes and
// requires_grad), the same zip records in the same order, data on 64-byte boundaries, every
// header field as torch writes it (the strict zip inspector), real CRCs; and the space options
// (--sparse, --sparse-masters) leave holes.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "container/torch_file.hpp"
#include "io/posix_file.hpp"
#include "support/test_files.hpp"
#include "support/zip_inspect.hpp"
#include "synth/checkpoint_writer.hpp"

namespace z2f::synth {
namespace {

using pickle::Value;

// Dict keys whose values are keyed by parameter names or indices: their schema is the union of
// their values' schemas, whatever the keys (the model differs from the fixtures').
bool is_map_key(const std::string& key) {
    static const std::set<std::string> keys = {
        "module",        "param_shapes",         "frozen_param_shapes", "frozen_param_fragments",
        "shared_params", "param_slice_mappings", "_metadata",           "state"};
    return keys.count(key) != 0;
}

std::string schema(const Value& value, const std::string& key);

std::string union_of(const std::vector<std::string>& parts) {
    std::set<std::string> unique(parts.begin(), parts.end());
    std::string text;
    for (const std::string& part : unique) {
        text += (text.empty() ? "" : "|") + part;
    }
    return text;
}

std::string dict_schema(const pickle::Dict& dict, const std::string& key) {
    std::string text = dict.ordered ? "OrderedDict" : "dict";
    if (is_map_key(key)) {
        std::vector<std::string> values;
        for (const auto& [k, v] : dict.items)
            values.push_back(schema(v, ""));
        text += "<" + union_of(values) + ">";
    } else {
        text += "{";
        for (const auto& [k, v] : dict.items) {
            std::string name = k.string() ? std::string(*k.string()) : "#";
            text += name + ":" + schema(v, name) + ",";
        }
        text += "}";
    }
    if (!dict.state.is_none()) {
        text += ".state" + schema(dict.state, "");
    }
    return text;
}

std::string schema(const Value& value, const std::string& key) {
    if (key == "ds_config") {
        return "config";  // the user's JSON config: free-form
    }
    switch (value.kind()) {
        case Value::Kind::kNone:
            return "None";
        case Value::Kind::kBool:
            return "bool";
        case Value::Kind::kInt:
            return "int";
        case Value::Kind::kFloat:
            return "float";
        case Value::Kind::kObject:
            break;
    }
    const pickle::Object& object = *value.as_object();
    switch (object.type) {
        case pickle::ObjectType::kStr:
            return "str";
        case pickle::ObjectType::kBytes:
            return "bytes";
        case pickle::ObjectType::kBigInt:
            return "int";
        case pickle::ObjectType::kTuple: {
            const auto& items = static_cast<const pickle::Tuple&>(object).items;
            if (std::all_of(items.begin(), items.end(),
                            [](const Value& v) { return v.is_int(); })) {
                return "ints";  // shapes, strides: any length
            }
            std::string text = "(";
            for (const Value& item : items)
                text += schema(item, "") + ",";
            return text + ")";
        }
        case pickle::ObjectType::kList: {
            std::vector<std::string> items;
            for (const Value& item : static_cast<const pickle::List&>(object).items) {
                items.push_back(schema(item, key));  // lists of maps stay maps
            }
            return "[" + union_of(items) + "]";
        }
        case pickle::ObjectType::kSet:
            return "set";
        case pickle::ObjectType::kDict:
            return dict_schema(static_cast<const pickle::Dict&>(object), key);
        case pickle::ObjectType::kGlobal: {
            const auto& global = static_cast<const pickle::Global&>(object);
            return "G:" + global.module + "." + global.name;
        }
        case pickle::ObjectType::kInstance: {
            const auto& instance = static_cast<const pickle::Instance&>(object);
            std::string text = "I:" + schema(instance.callable, "") + schema(instance.args, "");
            text += instance.via_newobj ? "/new" : "";
            if (!instance.state.is_none())
                text += "/state" + schema(instance.state, "");
            return text;
        }
        case pickle::ObjectType::kStorage:
            return "S";
        case pickle::ObjectType::kTensor: {
            const auto& tensor = static_cast<const pickle::Tensor&>(object);
            return std::string("T:") +
                   std::string(tensor.dtype ? dtype_display_name(*tensor.dtype) : "?") +
                   (tensor.requires_grad ? "+grad" : "");
        }
    }
    return "?";
}

// Record names (relative to the archive folder), runs of data/<key> collapsed to data/*.
std::vector<std::string> record_layout(const std::string& path) {
    container::TorchFile file = container::TorchFile::open(path);
    std::vector<std::string> names;
    for (const container::ZipRecord& record : file.zip()->records()) {
        std::string name = record.name;
        if (name.rfind("data/", 0) == 0)
            name = "data/*";
        if (names.empty() || names.back() != name || name != "data/*")
            names.push_back(name);
    }
    return names;
}

// The strict inspector (every header field, FB padding, 64-byte data offsets) and real CRCs;
// data/<key> records in torch's order (keys sorted as strings).
void check_zip(const std::string& path) {
    SCOPED_TRACE(path);
    io::File file = io::File::open_read(path);
    test::ByteSource source = [&](std::uint64_t offset, std::size_t size) {
        std::vector<std::byte> bytes(size);
        file.read_exact(offset, bytes);
        return bytes;
    };
    test::ZipArchiveInfo info = test::inspect_zip(source, file.size());
    test::check_crcs(source, info);
    std::vector<std::string> keys;
    for (const test::ZipRecordInfo& record : info.records) {
        EXPECT_EQ(record.data_offset % 64, 0u) << record.name;
        auto slash = record.name.find("/data/");
        if (slash != std::string::npos)
            keys.push_back(record.name.substr(slash + 6));
    }
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

struct Comparison {
    std::string fixture;       // folder under tests/data/deepspeed
    std::string fixture_file;  // inside global_step2/
    std::string ours_file;     // inside the synthetic tag folder
};

void expect_same_structure(const SynthOptions& options, const std::vector<Comparison>& files) {
    testing::TempDir dir;
    write_checkpoint(SynthContext::make(options), dir.path());
    for (const Comparison& c : files) {
        SCOPED_TRACE(c.fixture + "/" + c.fixture_file);
        std::string real = testing::fixture_path(c.fixture + "/global_step2/" + c.fixture_file);
        std::string ours = dir.path() + "/" + options.tag + "/" + c.ours_file;
        check_zip(ours);
        container::TorchFile real_file = container::TorchFile::open(real);
        container::TorchFile our_file = container::TorchFile::open(ours);
        EXPECT_EQ(schema(our_file.root(), ""), schema(real_file.root(), ""));
        EXPECT_EQ(record_layout(ours), record_layout(real));
        EXPECT_EQ(our_file.zip()->prefix(), real_file.zip()->prefix());
    }
}

SynthOptions options_like_fixtures(int stage, DType dtype) {
    SynthOptions options;
    options.shape = LlamaShape{"test", 53, 20, 37, 2, 4, 2, 5};
    options.model.dtype = dtype;
    options.model.param_groups = 1;  // the fixtures' models have one group unless "twogroups"
    options.stage = stage;
    options.world = 2;
    return options;
}

TEST(SynthStructure, Stage3Bf16LikeDeepSpeed) {
    expect_same_structure(options_like_fixtures(3, DType::kBF16),
                          {{"z3_ws2_bf16", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                            "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"},
                           {"z3_ws2_bf16", "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt",
                            "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"},
                           {"z3_ws2_bf16", "zero_pp_rank_0_mp_rank_00_model_states.pt",
                            "zero_pp_rank_0_mp_rank_00_model_states.pt"}});
}

TEST(SynthStructure, Stage2Bf16LikeDeepSpeed) {
    expect_same_structure(
        options_like_fixtures(2, DType::kBF16),
        {{"z2_ws2_bf16", "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt",
          "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"},
         {"z2_ws2_bf16", "mp_rank_00_model_states.pt", "mp_rank_00_model_states.pt"}});
}

TEST(SynthStructure, Stage2TwoGroupsLikeDeepSpeed) {
    SynthOptions options = options_like_fixtures(2, DType::kF32);
    options.model.param_groups = 2;
    expect_same_structure(
        options,
        {{"z2_ws2_twogroups_fp32", "zero_pp_rank_1_mp_rank_00_optim_states.pt",
          "zero_pp_rank_1_mp_rank_00_optim_states.pt"},
         {"z2_ws2_twogroups_fp32", "mp_rank_00_model_states.pt", "mp_rank_00_model_states.pt"}});
}

TEST(SynthStructure, FrozenLikeDeepSpeed) {
    SynthOptions stage2 = options_like_fixtures(2, DType::kBF16);
    stage2.model.frozen = "mlp";
    expect_same_structure(
        stage2, {{"z2_ws2_frozen_bf16", "mp_rank_00_model_states.pt", "mp_rank_00_model_states.pt"},
                 {"z2_ws2_frozen_bf16", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
                  "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"}});
    SynthOptions stage3 = options_like_fixtures(3, DType::kBF16);
    stage3.model.frozen = "mlp";
    expect_same_structure(stage3,
                          {{"z3_ws2_frozen_bf16", "zero_pp_rank_1_mp_rank_00_model_states.pt",
                            "zero_pp_rank_1_mp_rank_00_model_states.pt"}});
}

TEST(SynthStructure, TiedWithBuffersLikeDeepSpeed) {
    SynthOptions options = options_like_fixtures(3, DType::kF32);
    options.model.tied = true;
    options.model.buffers = true;
    expect_same_structure(options,
                          {{"z3_ws2_tied_fp32", "zero_pp_rank_0_mp_rank_00_model_states.pt",
                            "zero_pp_rank_0_mp_rank_00_model_states.pt"},
                           {"z3_ws2_tied_fp32", "zero_pp_rank_1_mp_rank_00_optim_states.pt",
                            "zero_pp_rank_1_mp_rank_00_optim_states.pt"}});
}

TEST(SynthStructure, Torch2LikeTheTorch2Fixture) {
    SynthOptions options = options_like_fixtures(3, DType::kF32);
    options.torch2 = true;
    options.zero_stage_encoding = ZeroStageEncoding::kByValue;
    expect_same_structure(options,
                          {{"z3_ws2_fp32_torch2", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                            "zero_pp_rank_0_mp_rank_00_optim_states.pt"},
                           {"z3_ws2_fp32_torch2", "zero_pp_rank_1_mp_rank_00_model_states.pt",
                            "zero_pp_rank_1_mp_rank_00_model_states.pt"}});
}

TEST(SynthStructure, ZeroStageEncodingsAndLossScalers) {
    // By name (Python 3.11) and by value; fp16 runs carry a DynamicLossScaler.
    testing::TempDir dir;
    SynthOptions options = options_like_fixtures(2, DType::kF16);
    options.zero_stage_encoding = ZeroStageEncoding::kByValue;
    write_checkpoint(SynthContext::make(options), dir.path());
    container::TorchFile file = container::TorchFile::open(
        dir.path() + "/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.pt");
    const auto* osd = file.root().get<pickle::Dict>()->find("optimizer_state_dict");
    ASSERT_NE(osd, nullptr);
    const auto* dict = osd->get<pickle::Dict>();
    EXPECT_EQ(schema(*dict->find("zero_stage"), ""),
              "I:G:deepspeed.runtime.zero.config.ZeroStageEnumints");
    std::string scaler = schema(*dict->find("loss_scaler"), "");
    EXPECT_NE(scaler.find("DynamicLossScaler"), std::string::npos) << scaler;
    EXPECT_NE(scaler.find("dtype:G:torch.float16"), std::string::npos) << scaler;
    EXPECT_EQ(schema(*dict->find("dynamic_loss_scale"), ""), "bool");
}

TEST(SynthStructure, SparseOptionsLeaveHoles) {
    // 4 layers of hidden 512 (about 17M parameters): moments of 8 MB and more per file.
    SynthOptions options;
    options.shape = LlamaShape{"test", 1000, 512, 1376, 4, 8, 2, 64};
    options.stage = 3;
    options.world = 2;
    options.sparse_moments = true;
    testing::TempDir dir;
    write_checkpoint(SynthContext::make(options), dir.path());
    std::string optim = dir.path() + "/global_step2/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt";
    check_zip(optim);
    std::uint64_t size = io::file_size(optim);
    // Masters (1/3 of the file) are real, moments (2/3) are holes.
    EXPECT_LT(io::allocated_bytes(optim), size / 2);
    EXPECT_GT(io::allocated_bytes(optim), size / 4);

    options.sparse_masters = true;
    options.model.buffers = true;
    options.tag = "masters";
    write_checkpoint(SynthContext::make(options), dir.path());
    optim = dir.path() + "/masters/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt";
    check_zip(optim);
    EXPECT_LT(io::allocated_bytes(optim), io::file_size(optim) / 50);

    options.stage = 2;
    options.tag = "stage2";
    write_checkpoint(SynthContext::make(options), dir.path());
    for (const char* name :
         {"bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt", "mp_rank_00_model_states.pt"}) {
        std::string path = dir.path() + "/stage2/" + name;
        check_zip(path);
        EXPECT_LT(io::allocated_bytes(path), io::file_size(path) / 20) << name;
    }
}

}  // namespace
}  // namespace z2f::synth
