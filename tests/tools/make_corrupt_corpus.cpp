// make_corrupt_corpus FIXTURES OUT: writes a corpus of broken checkpoints, one folder per case
// under OUT, each derived from a bundled real fixture, and a list of the cases (OUT/cases.txt:
// name, checkpoint folder and the text the error must contain, separated by tabs).
//
// The cases cover the input faults a conversion must survive with a clear error: truncation
// inside data.pkl, inside a storage record and inside the central directory; flipped bytes in
// headers and pickles; a wrong CRC; missing, extra and mismatched rank files; a `latest` that
// names a missing tag; a tag without optimizer files; empty files; a directory where a file
// should be; a symlink loop; pickles with huge declared lengths or extreme nesting; shapes whose
// element count overflows 64 bits; tensor views past their storage record. And, from the
// parallel fixtures (FIXTURES/../deepspeed-parallel): broken model, layer and expert files, holes
// in the grid, files of two layouts, a tensor-parallel checkpoint whose rules were removed, TP
// replicas that differ, and the refused combinations (ZeRO-3 with TP, MoE with TP, AutoEP
// ZeRO-3).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/parallel_assemble.hpp"
#include "common/bytes.hpp"
#include "container/zip_reader.hpp"
#include "container/zip_writer.hpp"
#include "io/posix_file.hpp"
#include "plan/parallel_plan.hpp"

namespace fs = std::filesystem;

namespace {

std::string g_fixtures;
std::string g_out;
std::ofstream g_cases;

using Bytes = std::vector<std::byte>;

Bytes read_all(const std::string& path) {
    z2f::io::File file = z2f::io::File::open_read(path);
    Bytes bytes(static_cast<std::size_t>(file.size()));
    file.read_exact(0, bytes);
    return bytes;
}

void write_all(const std::string& path, const Bytes& bytes) {
    z2f::io::File file = z2f::io::File::create_truncate(path);
    file.write_all(0, bytes);
}

// A fresh copy of fixture `name` as case `label`; returns the tag folder of the copy.
std::string copy_case(const std::string& label, const std::string& fixture) {
    std::string dir = g_out + "/" + label;
    fs::remove_all(dir);
    fs::copy(g_fixtures + "/" + fixture, dir, fs::copy_options::recursive);
    fs::remove_all(dir + "/ref");
    return dir + "/global_step2";
}

// One line per case: name, checkpoint folder, text the error message must contain (tabs).
void record_case(const std::string& label, const std::string& expect) {
    g_cases << label << "\t" << g_out << "/" << label << "\t" << expect << "\n";
}

// Rewrites a torch file with record `name` passed through `edit` (all other records copied),
// so that every CRC stays right.
void rewrite_record(const std::string& path, const std::string& name,
                    const std::function<void(Bytes&, std::uint64_t)>& edit) {
    z2f::io::File file = z2f::io::File::open_read(path);
    z2f::container::TorchArchive archive = z2f::container::TorchArchive::open(file);
    std::vector<std::pair<std::string, Bytes>> records;
    for (const z2f::container::ZipRecord& record : archive.records()) {
        Bytes data = archive.read_record(file, record, UINT64_MAX);
        if (record.name == name || record.name.ends_with("/" + name))
            edit(data, archive.data_offset(file, record));
        records.emplace_back(record.name, std::move(data));
    }
    std::string prefix = archive.prefix();
    file.close();
    std::string temp = path + ".new";
    z2f::container::zip::TorchZipWriter writer(temp, prefix);
    for (const auto& [record_name, data] : records)
        writer.add_record(record_name, data);
    writer.finish();
    fs::rename(temp, path);
}

// Rewrites a torch file with its data.pkl passed through `edit` (all other records copied).
void rewrite_pickle(const std::string& path, const std::function<void(Bytes&)>& edit) {
    z2f::io::File file = z2f::io::File::open_read(path);
    z2f::container::TorchArchive archive = z2f::container::TorchArchive::open(file);
    std::vector<std::pair<std::string, Bytes>> records;
    for (const z2f::container::ZipRecord& record : archive.records()) {
        Bytes data = archive.read_record(file, record, UINT64_MAX);
        if (record.name == "data.pkl")
            edit(data);
        records.emplace_back(record.name, std::move(data));
    }
    std::string prefix = archive.prefix();
    file.close();
    std::string temp = path + ".new";
    z2f::container::zip::TorchZipWriter writer(temp, prefix);
    for (const auto& [name, data] : records)
        writer.add_record(name, data);
    writer.finish();
    fs::rename(temp, path);
}

// Replaces the first occurrence of `from` found after `anchor` in the bytes.
void replace_after(Bytes& bytes, const std::string& anchor, const std::string& from,
                   const std::string& to) {
    auto view = z2f::as_string_view(bytes);
    std::size_t start = anchor.empty() ? 0 : view.find(anchor);
    std::size_t at =
        start == std::string_view::npos ? std::string_view::npos : view.find(from, start);
    if (at == std::string_view::npos) {
        throw std::runtime_error("pattern not found after '" + anchor + "'");
    }
    Bytes replacement(to.size());
    for (std::size_t i = 0; i < to.size(); ++i)
        replacement[i] = static_cast<std::byte>(to[i]);
    bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                bytes.begin() + static_cast<std::ptrdiff_t>(at + from.size()));
    bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), replacement.begin(),
                 replacement.end());
}

struct RecordSpan {
    std::uint64_t data_offset;
    std::uint64_t size;
    std::uint64_t central_directory;  // offset of the first central directory header
};

RecordSpan locate(const std::string& path, const std::string& name) {
    z2f::io::File file = z2f::io::File::open_read(path);
    z2f::container::TorchArchive archive = z2f::container::TorchArchive::open(file);
    const z2f::container::ZipRecord& record = archive.require(name);
    Bytes all = read_all(path);
    std::size_t central = z2f::as_string_view(all).find(std::string("PK\x01\x02", 4));
    return {archive.data_offset(file, record), record.size, central};
}

void truncate_to(const std::string& path, std::uint64_t size) {
    Bytes bytes = read_all(path);
    bytes.resize(static_cast<std::size_t>(size));
    write_all(path, bytes);
}

void flip(const std::string& path, std::uint64_t offset) {
    Bytes bytes = read_all(path);
    bytes.at(static_cast<std::size_t>(offset)) ^= std::byte{0xFF};
    write_all(path, bytes);
}

// Adds `delta` to fp32 element `element` of copy `copy` of a TP-replicated tensor, found through
// the parallel plan: the byte range of that element in its input file, then the storage record
// holding it, rewritten.
void perturb_replica(const std::string& tag_dir, const std::string& tensor, std::size_t copy,
                     std::uint64_t element, float delta) {
    z2f::checkpoint::ParallelCheckpointMeta meta = z2f::checkpoint::read_parallel_checkpoint_meta(
        z2f::checkpoint::discover_file_grid(tag_dir, ""));
    z2f::plan::PiecedPlan plan = z2f::plan::plan_parallel_consolidation(meta, {});
    for (const z2f::plan::PlannedTensor& planned : plan.plan.tensors) {
        if (planned.name != tensor)
            continue;
        const z2f::SourceExtent at =
            z2f::plan::slice_stream(planned.pieces.at(0).sources.at(copy), element * 4, 4).front();
        const std::string path = plan.plan.inputs.at(at.file).path;
        z2f::io::File file = z2f::io::File::open_read(path);
        z2f::container::TorchArchive archive = z2f::container::TorchArchive::open(file);
        for (const z2f::container::ZipRecord& record : archive.records()) {
            std::uint64_t begin = archive.data_offset(file, record);
            if (at.offset < begin || at.offset + 4 > begin + record.size)
                continue;
            std::string name = record.name;
            file.close();
            rewrite_record(path, name, [&](Bytes& data, std::uint64_t data_offset) {
                float value;
                std::memcpy(&value, &data.at(at.offset - data_offset), 4);
                value += delta;
                std::memcpy(&data.at(at.offset - data_offset), &value, 4);
            });
            return;
        }
        throw std::runtime_error("no record holds element " + std::to_string(element) + " of " +
                                 tensor);
    }
    throw std::runtime_error("no tensor " + tensor + " in " + tag_dir);
}

// Copies the files of model-parallel rank 00 as rank `mp` (names only change).
void copy_as_mp_rank(const std::string& tag, const std::string& mp) {
    for (const auto& entry : fs::directory_iterator(tag)) {
        std::string name = entry.path().filename().string();
        std::size_t at = name.find("mp_rank_00");
        if (at == std::string::npos || name.starts_with("expp_rank_"))
            continue;
        std::string renamed = name;
        renamed.replace(at, 10, "mp_rank_" + mp);
        fs::copy_file(entry.path(), tag + "/" + renamed);
    }
}

const std::string kParallel = "../deepspeed-parallel/";

void parallel_cases() {
    const std::string tp = kParallel + "tp2_dp2_z1_fp32";
    const std::string pp = kParallel + "pp2_dp2_z1_fp32";
    const std::string moe = kParallel + "moe_ep2_dp2_z2_fp32";
    {
        std::string tag = copy_case("parallel_truncated_tp_model_file", tp);
        const std::string name = "mp_rank_01_model_states.pt";
        RecordSpan pickle = locate(tag + "/" + name, "data.pkl");
        truncate_to(tag + "/" + name, pickle.data_offset + pickle.size / 2);
        record_case("parallel_truncated_tp_model_file", name);
    }
    {
        std::string tag = copy_case("parallel_flipped_layer_pickle", pp);
        const std::string name = "layer_04-model_states.pt";
        RecordSpan pickle = locate(tag + "/" + name, "data.pkl");
        flip(tag + "/" + name, pickle.data_offset + pickle.size / 3);
        record_case("parallel_flipped_layer_pickle", name);
    }
    {
        std::string tag = copy_case("parallel_zero_length_expert_file", moe);
        const std::string name = "layer_0_expert_2_mp_rank_00_model_states.pt";
        truncate_to(tag + "/" + name, 0);
        record_case("parallel_zero_length_expert_file", name);
    }
    {
        std::string tag = copy_case("parallel_missing_tp_optim_file", tp);
        fs::remove(tag + "/zero_pp_rank_1_mp_rank_01_optim_states.pt");
        record_case("parallel_missing_tp_optim_file", "mp rank 01 has 1 optimizer files");
    }
    {
        std::string tag = copy_case("parallel_missing_expert_file", moe);
        fs::remove(tag + "/layer_0_expert_3_mp_rank_00_model_states.pt");
        record_case("parallel_missing_expert_file", "but 3 expert files");
    }
    {
        std::string tag = copy_case("parallel_both_layer_file_forms", pp);
        fs::copy_file(tag + "/layer_04-model_states.pt",
                      tag + "/layer_03-model_00-model_states.pt");
        record_case("parallel_both_layer_file_forms", "holds both layer_LL-model_states.pt");
    }
    {
        std::string tag = copy_case("tp_without_rules", tp);
        for (const char* name : {"mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"}) {
            rewrite_pickle(tag + "/" + name, [](Bytes& pkl) {
                replace_after(pkl, "", "universal_checkpoint_info", "universal_checkpoint_xxxx");
            });
        }
        record_case("tp_without_rules", "--tp-rules");
    }
    {
        std::string tag = copy_case("tp_replica_mismatch", tp);
        perturb_replica(tag, "language_model.encoder.layers.1.input_layernorm.bias", 1, 5, 0.5f);
        record_case("tp_replica_mismatch", "largest difference 0.5 at element 5");
    }
    {
        std::string tag = copy_case("zero3_with_tp", "z3_ws2_fp32");
        copy_as_mp_rank(tag, "01");
        record_case("zero3_with_tp", "model files of 2 model-parallel ranks");
    }
    {
        std::string tag = copy_case("moe_with_tp", moe);
        copy_as_mp_rank(tag, "01");
        record_case("moe_with_tp", "MoE expert files together with tensor parallelism");
    }
    {
        // A ZeRO-3 model file of AutoEP whose ds_autoep_layers is a dict of layers where
        // DeepSpeed writes a list, added to the top-level dict (right after its first MARK).
        std::string tag = copy_case("autoep_zero3", "z3_ws2_fp32");
        auto text = [](const std::string& value) {
            std::string out = "X";
            for (int shift = 0; shift < 32; shift += 8)
                out.push_back(static_cast<char>((value.size() >> shift) & 0xFF));
            return out + value;
        };
        const std::string entry = text("ds_autoep_layers") + "}(" + text("moe.layer") + "}(" +
                                  text("checkpoint_format") + text("zero3_partitioned") + "uu";
        for (const char* name : {"zero_pp_rank_0_mp_rank_00_model_states.pt",
                                 "zero_pp_rank_1_mp_rank_00_model_states.pt"}) {
            rewrite_pickle(tag + "/" + name, [&](Bytes& pkl) {
                std::size_t mark = z2f::as_string_view(pkl).find('(');
                if (mark == std::string_view::npos)
                    throw std::runtime_error("no MARK in the model pickle");
                for (std::size_t i = 0; i < entry.size(); ++i) {
                    pkl.insert(pkl.begin() + static_cast<std::ptrdiff_t>(mark + 1 + i),
                               static_cast<std::byte>(entry[i]));
                }
            });
        }
        record_case("autoep_zero3", "expected a list of AutoEP layer dicts");
    }
}

const std::string kOptim1 = "zero_pp_rank_1_mp_rank_00_optim_states.pt";
const std::string kModel0 = "zero_pp_rank_0_mp_rank_00_model_states.pt";

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_corrupt_corpus FIXTURES OUT\n");
        return 2;
    }
    g_fixtures = argv[1];
    g_out = argv[2];
    fs::create_directories(g_out);
    g_cases.open(g_out + "/cases.txt");
    try {
        const std::string base = "z3_ws2_fp32";
        std::string optim = g_fixtures + "/" + base + "/global_step2/" + kOptim1;
        RecordSpan pickle = locate(optim, "data.pkl");
        RecordSpan storage = locate(optim, "data/3");

        struct Cut {
            const char* label;
            std::uint64_t size;
        };
        for (Cut cut : {Cut{"truncated_in_pickle", pickle.data_offset + pickle.size / 2},
                        Cut{"truncated_in_storage", storage.data_offset + storage.size / 2},
                        Cut{"truncated_in_central_directory", pickle.central_directory + 30},
                        Cut{"truncated_before_end_record", read_all(optim).size() - 10},
                        Cut{"zero_length_optim_file", 0}}) {
            std::string tag = copy_case(cut.label, base);
            truncate_to(tag + "/" + kOptim1, cut.size);
            record_case(cut.label, kOptim1);
        }
        struct Flip {
            const char* label;
            std::uint64_t offset;
        };
        for (Flip f : {Flip{"flipped_local_header_signature", 0},
                       Flip{"flipped_central_directory", pickle.central_directory + 10},
                       Flip{"flipped_pickle_opcode", pickle.data_offset + 2},
                       Flip{"flipped_pickle_middle", pickle.data_offset + pickle.size / 3}}) {
            std::string tag = copy_case(f.label, base);
            flip(tag + "/" + kOptim1, f.offset);
            record_case(f.label, kOptim1);
        }
        {
            // Any byte of data.pkl changed while the directory keeps the old CRC.
            std::string tag = copy_case("wrong_pickle_crc", base);
            flip(tag + "/" + kOptim1, pickle.data_offset + pickle.size - 3);
            record_case("wrong_pickle_crc", kOptim1);
        }
        {
            std::string tag = copy_case("missing_rank_file", base);
            fs::remove(tag + "/" + kOptim1);
            record_case("missing_rank_file", "expected 2 *_optim_states.pt files");
        }
        {
            std::string tag = copy_case("extra_stale_rank_file", base);
            fs::copy_file(tag + "/" + kOptim1, tag + "/zero_pp_rank_2_mp_rank_00_optim_states.pt");
            fs::copy_file(tag + "/zero_pp_rank_1_mp_rank_00_model_states.pt",
                          tag + "/zero_pp_rank_2_mp_rank_00_model_states.pt");
            record_case("extra_stale_rank_file", "expected 2 *_optim_states.pt files");
        }
        {
            // Rank 1 from a W=4 run of the same model next to rank 0 of the W=2 run.
            std::string tag = copy_case("mixed_world_sizes", base);
            fs::copy_file(g_fixtures + "/z3_ws4_fp32/global_step2/" + kOptim1, tag + "/" + kOptim1,
                          fs::copy_options::overwrite_existing);
            record_case("mixed_world_sizes", kOptim1);
        }
        {
            std::string tag = copy_case("latest_names_missing_tag", base);
            std::ofstream(g_out + "/latest_names_missing_tag/latest") << "global_step9";
            record_case("latest_names_missing_tag", "global_step9");
        }
        {
            std::string tag = copy_case("tag_without_optim_files", base);
            for (const auto& entry : fs::directory_iterator(tag)) {
                if (entry.path().string().ends_with("optim_states.pt"))
                    fs::remove(entry.path());
            }
            record_case("tag_without_optim_files", "no *_optim_states.pt files");
        }
        {
            std::string tag = copy_case("zero_length_model_file", base);
            truncate_to(tag + "/" + kModel0, 0);
            record_case("zero_length_model_file", kModel0);
        }
        {
            std::string tag = copy_case("directory_instead_of_file", base);
            fs::remove(tag + "/" + kOptim1);
            fs::create_directory(tag + "/" + kOptim1);
            record_case("directory_instead_of_file", kOptim1);
        }
        {
            std::string tag = copy_case("symlink_loop", base);
            fs::remove(tag + "/" + kOptim1);
            fs::create_symlink(kOptim1, tag + "/" + kOptim1);
            record_case("symlink_loop", "Too many levels of symbolic links");
        }
        {
            // BINUNICODE declaring 4 GiB - 1 bytes.
            std::string tag = copy_case("pickle_huge_string_length", base);
            rewrite_pickle(tag + "/" + kOptim1, [](Bytes& pkl) {
                replace_after(pkl, "", std::string("X\x14\x00\x00\x00optimizer_state_dict", 25),
                              std::string("X\xff\xff\xff\xffoptimizer_state_dict", 25));
            });
            record_case("pickle_huge_string_length", kOptim1);
        }
        {
            // 100,000 MARKs in front of the pickle.
            std::string tag = copy_case("pickle_extreme_nesting", base);
            rewrite_pickle(tag + "/" + kOptim1,
                           [](Bytes& pkl) { pkl.insert(pkl.begin() + 2, 100000, std::byte{'('}); });
            record_case("pickle_extreme_nesting", kOptim1);
        }
        {
            // param_shapes: fc1.weight (53, 37) becomes (2^62, 2^62).
            std::string tag = copy_case("shape_product_overflows", base);
            std::string big =
                std::string("\x8a\x08", 2) + std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8);
            rewrite_pickle(tag + "/" + kModel0, [&](Bytes& pkl) {
                replace_after(pkl, "param_shapes", std::string("K5K%\x86", 5), big + big + "\x86");
            });
            record_case("shape_product_overflows", kModel0);
        }
        {
            // The fp32 partition's storage offset moved far past its record.
            std::string tag = copy_case("storage_offset_beyond_record", base);
            rewrite_pickle(tag + "/" + kOptim1, [](Bytes& pkl) {
                replace_after(pkl, "fp32_flat_groups", std::string("QK\x00", 3),
                              std::string("QJ\xff\xff\x00\x00", 6));
            });
            record_case("storage_offset_beyond_record", kOptim1);
        }
        {
            // The partition claims more elements than its storage holds.
            std::string tag = copy_case("tensor_larger_than_storage", base);
            rewrite_pickle(tag + "/" + kOptim1, [](Bytes& pkl) {
                // The rank's 1,824-element partition (BININT2 0x0720) claims 1,050,400 elements.
                replace_after(pkl, "fp32_flat_groups", std::string("QK\x00M\x20\x07", 6),
                              std::string("QK\x00J\x20\x07\x10\x00", 8));
            });
            record_case("tensor_larger_than_storage", kOptim1);
        }
        {
            // A legacy (non-zip) torch.save file in place of an optimizer file.
            std::string tag = copy_case("legacy_format_optim_file", base);
            Bytes legacy;
            for (char c : std::string(
                     "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.",
                     20)) {
                legacy.push_back(static_cast<std::byte>(c));
            }
            legacy.resize(4096, std::byte{0});
            write_all(tag + "/" + kOptim1, legacy);
            record_case("legacy_format_optim_file", "legacy (non-zip)");
        }
        parallel_cases();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "make_corrupt_corpus: %s\n", error.what());
        return 1;
    }
    return 0;
}
