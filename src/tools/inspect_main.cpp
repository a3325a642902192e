// zero2fp32-inspect: shows what is inside a torch.save file (or a safetensors or HDF5 file)
// without loading its tensors.
//
// Prints the zip record table (name, data offset, size, method, CRC), or the storages of a file
// in torch's legacy format, and the pickle as an
// indented tree in which every tensor is shown as dtype / shape / strides / storage record /
// element offset, plus the absolute file offset of its first byte. Reads the zip directory and
// data.pkl only, so it is instant on a multi-GB optimizer file. Safetensors and HDF5 files (the
// converter's outputs) are shown as their header: one line per tensor (tools/inspect_hdf5.hpp).
#include <array>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>

#include <boost/program_options.hpp>

#include "cli/exit_code.hpp"
#include "common/errors.hpp"
#include "container/torch_file.hpp"
#include "io/posix_file.hpp"
#include "output/safetensors_reader.hpp"
#include "pickle/printer.hpp"
#include "tools/inspect_hdf5.hpp"
#include "zero2fp32/version.hpp"

namespace po = boost::program_options;

namespace {

void print_zip_records(const z2f::container::TorchFile& torch_file,
                       const z2f::container::TorchArchive& archive) {
    std::cout << "archive folder: " << archive.prefix() << "/\n";
    std::cout << "records: " << archive.records().size() << "\n";
    std::cout << "  " << std::left << std::setw(40) << "name" << std::right << std::setw(14)
              << "data offset" << std::setw(16) << "size" << std::setw(8) << "method"
              << std::setw(12) << "crc32"
              << "\n";
    for (const z2f::container::ZipRecord& record : archive.records()) {
        std::string offset;
        try {
            offset = std::to_string(archive.data_offset(torch_file.file(), record));
        } catch (const z2f::Error& error) {
            offset = "?";
        }
        char crc[16];
        std::snprintf(crc, sizeof crc, "%08x", record.crc32);
        std::cout << "  " << std::left << std::setw(40) << record.name << std::right
                  << std::setw(14) << offset << std::setw(16) << record.size << std::setw(8)
                  << (record.method == 0 ? "stored" : std::to_string(record.method))
                  << std::setw(12) << crc << "\n";
    }
}

// The legacy format has storages in a row instead of records, and no CRCs.
void print_legacy_storages(const z2f::container::LegacyArchive& legacy) {
    std::cout << "torch legacy (non-zip) format: object pickle at byte " << legacy.pickle_offset()
              << " (" << legacy.pickle_size() << " bytes), no checksums\n";
    std::cout << "storages: " << legacy.storages().size() << "\n";
    std::cout << "  " << std::left << std::setw(40) << "key" << std::right << std::setw(14)
              << "data offset" << std::setw(16) << "size"
              << "\n";
    for (const z2f::container::LegacyStorage& storage : legacy.storages()) {
        std::cout << "  " << std::left << std::setw(40) << storage.key << std::right
                  << std::setw(14) << storage.data_offset << std::setw(16) << storage.size << "\n";
    }
}

void print_records(const z2f::container::TorchFile& torch_file) {
    if (const z2f::container::TorchArchive* archive = torch_file.zip())
        print_zip_records(torch_file, *archive);
    else if (const z2f::container::LegacyArchive* legacy = torch_file.legacy())
        print_legacy_storages(*legacy);
}

bool looks_like_safetensors(const std::string& path) {
    z2f::io::File file = z2f::io::File::open_read(path);
    std::array<std::byte, 9> head{};
    return file.read_at_most(0, head) == head.size() && head[8] == std::byte{'{'};
}

// The header of a safetensors file: metadata and one line per tensor.
void print_safetensors(const std::string& path) {
    z2f::io::File file = z2f::io::File::open_read(path);
    std::uint64_t size = file.size();
    std::array<std::byte, 8> prefix{};
    file.read_exact(0, prefix);
    std::uint64_t length = z2f::output::safetensors_header_length(prefix, size, path);
    std::vector<std::byte> head(static_cast<std::size_t>(8 + length));
    file.read_exact(0, head);
    z2f::output::SafetensorsHeader header = z2f::output::parse_safetensors_header(head, size, path);
    std::cout << "file: " << path << " (" << size << " bytes, safetensors, header " << length
              << " bytes)\n";
    for (const auto& [key, value] : header.metadata) {
        std::cout << "metadata: " << key << " = " << value << "\n";
    }
    std::cout << "tensors: " << header.tensors.size() << "\n";
    for (const auto& tensor : header.tensors) {
        std::string shape = "[";
        for (std::size_t i = 0; i < tensor.shape.size(); ++i) {
            shape += (i == 0 ? "" : ", ") + std::to_string(tensor.shape[i]);
        }
        shape += "]";
        std::cout << "  " << std::left << std::setw(48) << tensor.name << std::setw(6)
                  << z2f::safetensors_name(tensor.dtype) << std::setw(20) << shape << std::right
                  << " @ " << header.data_offset + tensor.begin << ", " << tensor.end - tensor.begin
                  << " bytes\n";
    }
}

}  // namespace

int main(int argc, char** argv) {
    po::options_description visible(
        "Usage: zero2fp32-inspect FILE (.pt, .bin, .safetensors or .h5) [options]\n\nOptions");
    visible.add_options()("help,h", "show this help")("version", "print the version")(
        "records-only", "print only the zip record table")("pickle-only",
                                                           "print only the pickle tree")(
        "depth", po::value<std::uint32_t>()->default_value(48), "maximum tree depth to print")(
        "max-lines", po::value<std::uint64_t>()->default_value(200000),
        "stop printing the tree after this many lines");
    po::options_description all;
    all.add(visible).add_options()("file", po::value<std::string>());
    po::positional_options_description positional;
    positional.add("file", 1);

    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& error) {
        std::cerr << "zero2fp32-inspect: " << error.what() << " (see --help)\n";
        return static_cast<int>(z2f::cli::ExitCode::kUsage);
    }
    if (vm.count("help") != 0) {
        std::cout << visible
                  << "\nExample:\n  zero2fp32-inspect "
                     "ckpt/global_step500/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt\n";
        return 0;
    }
    if (vm.count("version") != 0) {
        std::cout << "zero2fp32-inspect " << z2f::kVersion << "\n";
        return 0;
    }
    if (vm.count("file") == 0) {
        std::cerr << "zero2fp32-inspect: no file given (see --help)\n";
        return static_cast<int>(z2f::cli::ExitCode::kUsage);
    }
    const auto path = vm["file"].as<std::string>();
    try {
        if (looks_like_safetensors(path)) {
            print_safetensors(path);
            return 0;
        }
        if (z2f::tools::looks_like_hdf5(path)) {
            z2f::tools::print_hdf5(std::cout, path);
            return 0;
        }
        z2f::container::TorchFile torch_file = z2f::container::TorchFile::open(path);
        std::cout << "file: " << path << " (" << torch_file.file_size() << " bytes)\n";
        if (vm.count("pickle-only") == 0) {
            print_records(torch_file);
        }
        if (vm.count("records-only") == 0) {
            std::cout << (torch_file.zip() ? "data.pkl: " : "object pickle: ")
                      << torch_file.document().object_count() << " objects\n";
            z2f::pickle::PrintOptions options;
            options.max_depth = vm["depth"].as<std::uint32_t>();
            options.max_lines = vm["max-lines"].as<std::uint64_t>();
            options.describe_tensor = [&](const z2f::pickle::Tensor& tensor) -> std::string {
                try {
                    z2f::container::TensorBytes bytes = torch_file.locate(tensor, "tensor");
                    return "@ file offset " + std::to_string(bytes.offset) + ", " +
                           std::to_string(bytes.length) + " bytes";
                } catch (const z2f::Error& error) {
                    return std::string("(unresolvable: ") + error.what() + ")";
                }
            };
            z2f::pickle::print_value(std::cout, torch_file.root(), options);
        }
    } catch (const z2f::Error& error) {
        std::cerr << "zero2fp32-inspect: " << error.what() << "\n";
        return static_cast<int>(z2f::cli::exit_code_for(error.kind()));
    }
    return 0;
}
