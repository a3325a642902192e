// make_corrupt_corpus FIXTURES OUT: writes a corpus of broken checkpoints, one folder per case
// under OUT, each derived from a bundled real fixture, and a list of the cases (OUT/cases.txt:
// name, checkpoint folder and the text the error must contain, separated by tabs).
//
// The cases cover the input faults a conversion must survive with a clear error: truncation
// inside data.pkl, inside a storage record and inside the central directory; flipped bytes in
// headers and pickles; a wrong CRC; missing, extra and mismatched rank files; a `latest` that
// names a missing tag; a tag without optimizer files; empty files; a directory where a file
// should be; a symlink loop; pickles with huge declared lengths or extreme nesting; shapes whose
// element count overflows 64 bits; tensor views past their storage record.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/bytes.hpp"
#include "container/zip_reader.hpp"
#include "container/zip_writer.hpp"
#include "io/posix_file.hpp"

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
    } catch (const std::exception& error) {
        std::fprintf(stderr, "make_corrupt_corpus: %s\n", error.what());
        return 1;
    }
    return 0;
}
