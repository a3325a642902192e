// Writes sample files for tests/python/check_torch_bin.py, which loads them with real torch and
// Python's zipfile:
//
//   OUT/sample.bin       test::sample_plan() laid out by layout_torch_bin_file and realised the
//                        way the execute phase does (fixed regions, slots, CRCs, tail)
//   OUT/sample_seq.bin   the same records written by container::zip::TorchZipWriter (must be
//   identical) OUT/values.pkl       a DeepSpeed-shaped pickle built with pickle::PickleValue
//   OUT/huge_sparse.bin  (with --zip64) a layout holding a 5 GiB bf16 tensor, written as a sparse
//                        file: only headers and two small tensors are real bytes, the big
//                        storage is a hole of zeros whose CRC is computed with crc32_join
//
// usage: z2f_write_sample_bin OUT_DIR [--zip64]
#include <cstdio>
#include <exception>
#include <numeric>
#include <string>
#include <vector>

#include "common/bytes.hpp"
#include "common/crc32.hpp"
#include "container/zip_writer.hpp"
#include "io/posix_file.hpp"
#include "output/torch_bin_layout.hpp"
#include "pickle/pickle_writer.hpp"
#include "support/torch_bin_sample.hpp"

namespace {

using namespace z2f;

std::vector<std::uint32_t> all_indices(const plan::TensorPlan& plan) {
    std::vector<std::uint32_t> indices(plan.tensors.size());
    std::iota(indices.begin(), indices.end(), 0u);
    return indices;
}

void write_sample(const std::string& dir) {
    plan::TensorPlan plan = test::sample_plan();
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("sample.bin", plan, all_indices(plan));
    std::string path = dir + "/sample.bin";
    test::realize_torch_layout(layout, path, [&](const output::TensorSlot& slot) {
        return test::sample_slot_bytes(plan, slot);
    });

    // Same records, sequential writer. Record bytes come from the file just written.
    std::string text = io::read_small_file(path, std::size_t{1} << 24);
    std::span<const std::byte> file = as_byte_span(text);
    container::zip::TorchZipWriter writer(dir + "/sample_seq.bin", "sample");
    for (const output::ZipEntry& entry : layout.zip_entries) {
        std::string name = entry.name.substr(entry.name.find('/') + 1);
        writer.add_record(name, file.subspan(entry.data_offset, entry.size));
    }
    writer.finish();
}

void write_values(const std::string& dir) {
    using pickle::PickleValue;
    auto shared = std::make_shared<const PickleValue>(PickleValue::list({"x", 1}));
    pickle::TensorToWrite flat;
    flat.storage = {DType::kF32, "0", 10, "cpu"};
    flat.storage_offset = 3;
    flat.shape = {4};
    pickle::TensorToWrite step;
    step.storage = {DType::kI64, "1", 1, "cuda:1"};
    std::vector<std::uint64_t> dims = {53, 37};
    const std::byte raw[] = {std::byte{0x00}, std::byte{0xFF}, std::byte{'a'}, std::byte{'b'}};
    PickleValue::Items many;
    for (int i = 0; i < 1001; ++i)
        many.emplace_back(i, i * i);
    PickleValue value = PickleValue::dict({
        {"optimizer_state_dict",
         PickleValue::dict({
             {"zero_stage", PickleValue::reduce(PickleValue::global("deepspeed.runtime.zero.config",
                                                                    "ZeroStageEnum"),
                                                PickleValue::tuple({3}))},
             {"loss_scaler",
              PickleValue::object(
                  PickleValue::global("deepspeed.runtime.fp16.loss_scaler", "LossScaler"),
                  PickleValue::dict({{"cur_scale", 65536.0}, {"dynamic", false}}))},
             {"dynamic_loss_scale", false},
             {"partition_count", PickleValue::list({2, 2})},
             {"fp32_flat_groups", PickleValue::list({PickleValue::tensor(flat)})},
             {"step", PickleValue::tensor(step)},
         })},
        {"param_shapes", PickleValue::list({PickleValue::ordered_dict(
                             {{"fc1.weight", PickleValue::torch_size(dims)},
                              {"fc1.bias", PickleValue::torch_size(std::span(dims).first(1))}})})},
        {"ds_version", "0.14.5"},
        {"unicode", "h\xc3\xa9llo"},
        {"numbers", PickleValue::tuple({0, 255, 256, 65536, -1, -2147483649LL, 7000000000LL,
                                        std::numeric_limits<std::int64_t>::min(), 3.25, -0.5})},
        {"flags", PickleValue::tuple({true, false, nullptr})},
        {"bytes", PickleValue::bytes(raw)},
        {"empty_bytes", PickleValue::bytes({})},
        {"shared_a", PickleValue::shared(shared)},
        {"shared_b", PickleValue::shared(shared)},
        {"many", PickleValue::dict(many)},
    });
    std::vector<std::byte> bytes = pickle::dump(value);
    io::File out = io::File::create_truncate(dir + "/values.pkl");
    out.write_all(0, bytes);
    out.close();
}

// CRC-32 of `length` zero bytes by doubling with crc32_join: no 5 GiB pass over memory.
std::uint32_t crc_of_zeros(std::uint64_t length) {
    std::vector<std::byte> block(1 << 20);
    std::uint32_t block_crc = crc32_of(block);
    std::uint64_t block_len = block.size();
    std::uint32_t crc = 0;
    std::uint64_t done = 0;
    while (done < length) {
        if ((length - done) & block_len) {  // length is a multiple of 1 MiB here
            crc = crc32_join(crc, block_crc, block_len);
            done += block_len;
        }
        block_crc = crc32_join(block_crc, block_crc, block_len);
        block_len *= 2;
    }
    return crc;
}

void write_huge_sparse(const std::string& dir) {
    plan::TensorPlan plan;
    auto add = [&](std::string name, std::vector<std::uint64_t> shape, DType dtype) {
        plan::PlannedTensor t;
        t.name = std::move(name);
        t.shape = std::move(shape);
        t.output_dtype = dtype;
        plan.tensors.push_back(t);
    };
    add("small", {4}, DType::kF32);
    add("huge", {std::uint64_t{5} << 29}, DType::kBF16);  // 5 GiB
    add("after", {2, 2}, DType::kF32);
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("huge_sparse.bin", plan, all_indices(plan));
    io::File file = io::File::create_truncate(dir + "/huge_sparse.bin");
    file.truncate(layout.size);  // a hole: the big storage reads as zeros
    for (const output::FixedRegion& region : layout.fixed) {
        file.write_all(region.offset, region.bytes);
    }
    std::vector<std::uint32_t> crcs;
    for (const output::TensorSlot& slot : layout.slots) {
        if (slot.tensor == 1) {
            crcs.push_back(crc_of_zeros(slot.length));
            continue;
        }
        const plan::PlannedTensor& t = plan.tensors[slot.tensor];
        std::vector<std::byte> bytes = test::sample_values(t.output_dtype, t.numel(), slot.tensor);
        file.write_all(slot.offset, bytes);
        crcs.push_back(crc32_of(bytes));
    }
    for (const output::FixedRegion& region : output::crc_tail(layout, crcs)) {
        file.write_all(region.offset, region.bytes);
    }
    file.close();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR [--zip64]\n", argv[0]);
        return 2;
    }
    try {
        std::string dir = argv[1];
        io::make_directories(dir);
        write_sample(dir);
        write_values(dir);
        if (argc > 2 && std::string(argv[2]) == "--zip64") {
            write_huge_sparse(dir);
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "z2f_write_sample_bin: %s\n", error.what());
        return 1;
    }
    return 0;
}
