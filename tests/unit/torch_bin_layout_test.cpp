#include "output/torch_bin_layout.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "common/bytes.hpp"
#include "common/errors.hpp"
#include "container/zip_writer.hpp"
#include "io/posix_file.hpp"
#include "support/pickle_inspect.hpp"
#include "support/torch_bin_sample.hpp"
#include "support/zip_inspect.hpp"

namespace z2f {
namespace {

namespace fs = std::filesystem;
using test::PyNode;
using test::PyRef;

std::vector<std::uint32_t> all_indices(const plan::TensorPlan& plan) {
    std::vector<std::uint32_t> indices(plan.tensors.size());
    std::iota(indices.begin(), indices.end(), 0u);
    return indices;
}

std::vector<std::byte> realize_sample(const plan::TensorPlan& plan,
                                      const output::OutputFileLayout& layout) {
    return test::realize_torch_layout_in_memory(layout, [&](const output::TensorSlot& slot) {
        return test::sample_slot_bytes(plan, slot);
    });
}

std::span<const std::byte> record_data(const std::vector<std::byte>& file,
                                       const test::ZipRecordInfo& record) {
    return std::span(file).subspan(record.data_offset, record.size);
}

// name -> (storage key, tensor repr) from a data.pkl our layout wrote.
struct PickledTensor {
    std::string key;
    std::string storage_class;
    std::int64_t numel = 0;
    std::string repr;
};
std::map<std::string, PickledTensor> pickled_tensors(std::span<const std::byte> pickle,
                                                     std::vector<std::string>* order = nullptr) {
    PyRef dict = test::load_pickle(pickle);
    EXPECT_EQ(dict->kind, PyNode::Kind::kDict);
    std::map<std::string, PickledTensor> out;
    for (std::size_t i = 0; i < dict->items.size(); i += 2) {
        const PyRef& call = dict->items[i + 1];
        const PyRef& persid = call->items[1]->items[0];
        const PyRef& id = persid->items[0];
        PickledTensor t{id->items[2]->text, id->items[1]->name, id->items[4]->integer,
                        test::repr(call)};
        out[dict->items[i]->text] = t;
        if (order)
            order->push_back(dict->items[i]->text);
    }
    return out;
}

// Fixed regions, slots and tail must tile [0, size) with no gap and no overlap.
void expect_tiling(const output::OutputFileLayout& layout,
                   const std::vector<output::FixedRegion>& tail) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
    for (const auto& r : layout.fixed)
        pieces.emplace_back(r.offset, r.bytes.size());
    for (const auto& s : layout.slots)
        pieces.emplace_back(s.offset, s.length);
    for (const auto& r : tail)
        pieces.emplace_back(r.offset, r.bytes.size());
    std::sort(pieces.begin(), pieces.end());
    std::uint64_t cursor = 0;
    for (const auto& [offset, length] : pieces) {
        EXPECT_EQ(offset, cursor) << "gap or overlap at " << cursor;
        cursor = offset + length;
    }
    EXPECT_EQ(cursor, layout.size);
    for (std::size_t i = 1; i < layout.slots.size(); ++i) {
        EXPECT_LT(layout.slots[i - 1].offset, layout.slots[i].offset);
    }
}

TEST(TorchBinLayout, SampleArchiveIsAWellFormedTorchZip) {
    plan::TensorPlan plan = test::sample_plan();
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("pytorch_model.bin", plan, all_indices(plan));
    EXPECT_EQ(layout.format, OutputFormat::kTorch);
    EXPECT_EQ(layout.name, "pytorch_model.bin");
    EXPECT_TRUE(layout.has_crc_tail());

    std::vector<std::byte> file = realize_sample(plan, layout);
    ASSERT_EQ(file.size(), layout.size);
    auto source = test::bytes_source(file);
    test::ZipArchiveInfo info = test::inspect_zip(source, file.size());
    test::check_crcs(source, info);

    // data.pkl, byteorder, one storage per non-alias tensor (10), version.
    std::vector<std::string> names;
    for (const auto& r : info.records)
        names.push_back(r.name);
    std::vector<std::string> expected = {"pytorch_model/data.pkl", "pytorch_model/byteorder"};
    for (int k = 0; k < 10; ++k)
        expected.push_back("pytorch_model/data/" + std::to_string(k));
    expected.push_back("pytorch_model/version");
    EXPECT_EQ(names, expected);
    EXPECT_EQ(as_string_view(record_data(file, info.records[1])), "little");
    EXPECT_EQ(as_string_view(record_data(file, info.records.back())), "3\n");

    // The layout's own bookkeeping agrees with what a reader finds.
    ASSERT_EQ(layout.zip_entries.size(), info.records.size());
    for (std::size_t i = 0; i < info.records.size(); ++i) {
        const output::ZipEntry& entry = layout.zip_entries[i];
        EXPECT_EQ(entry.name, info.records[i].name);
        EXPECT_EQ(entry.local_header_offset, info.records[i].local_header_offset);
        EXPECT_EQ(entry.data_offset, info.records[i].data_offset);
        EXPECT_EQ(entry.size, info.records[i].size);
        bool is_storage = i >= 2 && i + 1 < info.records.size();
        EXPECT_EQ(entry.slot >= 0, is_storage);
        EXPECT_EQ(entry.crc32.has_value(), !is_storage);
        if (entry.crc32) {
            EXPECT_EQ(*entry.crc32, info.records[i].crc);
        }
        if (is_storage) {
            const output::TensorSlot& slot = layout.slots[static_cast<std::size_t>(entry.slot)];
            EXPECT_EQ(slot.offset, entry.data_offset);
            EXPECT_EQ(slot.length, entry.size);
            EXPECT_EQ(std::vector<std::byte>(record_data(file, info.records[i]).begin(),
                                             record_data(file, info.records[i]).end()),
                      test::sample_slot_bytes(plan, slot));
        }
    }
    std::vector<std::uint32_t> crcs;
    for (const auto& slot : layout.slots) {
        crcs.push_back(info.records[2 + crcs.size()].crc);
        (void)slot;
    }
    expect_tiling(layout, output::crc_tail(layout, crcs));

    // The pickle: every tensor, in plan order, contiguous, requires_grad False.
    std::vector<std::string> order;
    auto tensors = pickled_tensors(record_data(file, info.records[0]), &order);
    std::vector<std::string> plan_names;
    for (const auto& t : plan.tensors)
        plan_names.push_back(t.name);
    EXPECT_EQ(order, plan_names);
    EXPECT_EQ(tensors["a.weight"].repr,
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.FloatStorage, '0', 'cpu', "
              "15)), 0, (3, 5), (5, 1), False, collections.OrderedDict())");
    EXPECT_EQ(tensors["b.scale"].storage_class, "BFloat16Storage");
    EXPECT_EQ(tensors["b.half"].storage_class, "HalfStorage");
    EXPECT_EQ(tensors["position_ids"].storage_class, "LongStorage");
    EXPECT_EQ(tensors["mask"].storage_class, "BoolStorage");
    EXPECT_EQ(tensors["c.double"].storage_class, "DoubleStorage");
}

TEST(TorchBinLayout, OnlyAllowListedGlobals) {
    plan::TensorPlan plan = test::sample_plan();
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("m.bin", plan, all_indices(plan));
    std::vector<std::byte> file = realize_sample(plan, layout);
    const output::ZipEntry& pkl = layout.zip_entries[0];
    std::map<std::uint8_t, std::size_t> ops;
    PyRef root = test::load_pickle(std::span(file).subspan(pkl.data_offset, pkl.size), &ops);
    std::set<std::string> seen;
    std::function<void(const PyRef&)> walk = [&](const PyRef& node) {
        if (node->kind == PyNode::Kind::kGlobal)
            seen.insert(node->text + "." + node->name);
        for (const auto& child : node->items)
            walk(child);
        for (const auto& child : node->dict_items)
            walk(child);
        if (node->state)
            walk(node->state);
    };
    walk(root);
    std::set<std::string> allowed = {"collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
                                     "torch.FloatStorage",      "torch.BFloat16Storage",
                                     "torch.HalfStorage",       "torch.LongStorage",
                                     "torch.BoolStorage",       "torch.DoubleStorage"};
    EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), seen.begin(), seen.end()));
    EXPECT_EQ(ops['c'], seen.size());  // each GLOBAL spelled out once, then memo gets
    EXPECT_EQ(ops['b'], 0u);           // no BUILD
    EXPECT_EQ(ops[0x81], 0u);          // no NEWOBJ
}

TEST(TorchBinLayout, DeterministicAndSameBytesAsTheSequentialWriter) {
    plan::TensorPlan plan = test::sample_plan();
    auto indices = all_indices(plan);
    output::OutputFileLayout a =
        output::layout_torch_bin_file("out/pytorch_model-00001-of-00002.bin", plan, indices);
    output::OutputFileLayout b =
        output::layout_torch_bin_file("out/pytorch_model-00001-of-00002.bin", plan, indices);
    std::vector<std::byte> file_a = realize_sample(plan, a);
    EXPECT_EQ(file_a, realize_sample(plan, b));
    EXPECT_EQ(a.zip_entries[0].name, "pytorch_model-00001-of-00002/data.pkl");

    // Through a real file, as the execute phase does.
    fs::path dir = fs::temp_directory_path() / ("z2f_layout_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string path = (dir / "layout.bin").string();
    test::realize_torch_layout(a, path, [&](const output::TensorSlot& slot) {
        return test::sample_slot_bytes(plan, slot);
    });
    std::string on_disk = io::read_small_file(path, std::size_t{1} << 20);
    EXPECT_EQ(on_disk, std::string(as_string_view(file_a)));

    // TorchZipWriter writing the same records sequentially produces the same archive.
    std::string seq = (dir / "pytorch_model-00001-of-00002.bin").string();
    {
        container::zip::TorchZipWriter writer(seq);
        auto source = test::bytes_source(file_a);
        test::ZipArchiveInfo info = test::inspect_zip(source, file_a.size());
        for (const auto& record : info.records) {
            std::string name = record.name.substr(record.name.find('/') + 1);
            if (name == "version")
                continue;  // finish() adds it
            writer.add_record(name, source(record.data_offset, record.size));
        }
        writer.finish();
    }
    EXPECT_EQ(io::read_small_file(seq, std::size_t{1} << 20), on_disk);
    fs::remove_all(dir);
}

TEST(TorchBinLayout, AliasesShareTheOwnersStorage) {
    plan::TensorPlan plan = test::sample_plan();
    const std::uint32_t tied = 10;  // "tied.weight", alias of 0 ("a.weight")

    // Owner first: the alias adds no record and points at storage "0".
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("m.bin", plan, all_indices(plan));
    EXPECT_EQ(layout.slots.size(), 10u);
    std::vector<std::byte> file = realize_sample(plan, layout);
    const output::ZipEntry& pkl = layout.zip_entries[0];
    auto tensors = pickled_tensors(std::span(file).subspan(pkl.data_offset, pkl.size));
    EXPECT_EQ(tensors["tied.weight"].key, "0");
    EXPECT_EQ(tensors["tied.weight"].repr, tensors["a.weight"].repr);
    for (const auto& slot : layout.slots)
        EXPECT_NE(slot.tensor, tied);

    // Alias first: the storage is numbered at the alias, filled from the owner.
    std::vector<std::uint32_t> alias_first = {tied, 1, 0};
    output::OutputFileLayout reordered = output::layout_torch_bin_file("m.bin", plan, alias_first);
    ASSERT_EQ(reordered.slots.size(), 2u);
    EXPECT_EQ(reordered.slots[0].tensor, 0u);
    EXPECT_EQ(reordered.slots[1].tensor, 1u);
    std::vector<std::byte> file2 = realize_sample(plan, reordered);
    const output::ZipEntry& pkl2 = reordered.zip_entries[0];
    auto tensors2 = pickled_tensors(std::span(file2).subspan(pkl2.data_offset, pkl2.size));
    EXPECT_EQ(tensors2["tied.weight"].key, "0");
    EXPECT_EQ(tensors2["a.bias"].key, "1");
    EXPECT_EQ(tensors2["a.weight"].key, "0");

    // Owner in another file: the alias gets its own storage holding the owner's bytes.
    std::vector<std::uint32_t> alone = {tied};
    output::OutputFileLayout orphan = output::layout_torch_bin_file("m.bin", plan, alone);
    ASSERT_EQ(orphan.slots.size(), 1u);
    EXPECT_EQ(orphan.slots[0].tensor, 0u);
    EXPECT_EQ(orphan.slots[0].length, 60u);
    std::vector<std::byte> file3 = realize_sample(plan, orphan);
    test::ZipArchiveInfo info = test::inspect_zip(test::bytes_source(file3), file3.size());
    test::check_crcs(test::bytes_source(file3), info);
}

TEST(TorchBinLayout, EmptyAndZeroDimTensors) {
    plan::TensorPlan plan = test::sample_plan();
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("m.bin", plan, all_indices(plan));
    std::vector<std::byte> file = realize_sample(plan, layout);
    auto source = test::bytes_source(file);
    test::ZipArchiveInfo info = test::inspect_zip(source, file.size());
    const output::ZipEntry& pkl = layout.zip_entries[0];
    auto tensors = pickled_tensors(std::span(file).subspan(pkl.data_offset, pkl.size));

    EXPECT_EQ(tensors["step"].repr,
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.FloatStorage, '4', 'cpu', "
              "1)), 0, (), (), False, collections.OrderedDict())");
    EXPECT_EQ(tensors["empty"].repr,
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.FloatStorage, '5', 'cpu', "
              "0)), 0, (0, 3), (3, 1), False, collections.OrderedDict())");
    EXPECT_EQ(tensors["also_empty"].repr,
              "torch._utils._rebuild_tensor_v2(persid(('storage', torch.BFloat16Storage, '9', "
              "'cpu', 0)), 0, (2, 0), (1, 1), False, collections.OrderedDict())");
    const test::ZipRecordInfo& step = info.records[2 + 4];
    EXPECT_EQ(step.size, 4u);
    const test::ZipRecordInfo& empty = info.records[2 + 5];
    EXPECT_EQ(empty.name, "m/data/5");
    EXPECT_EQ(empty.size, 0u);
    EXPECT_EQ(empty.flags, 0x0800);
    EXPECT_EQ(empty.descriptor_size, 0u);

    // No data descriptor region for empty storages in the tail.
    std::vector<std::uint32_t> crcs(layout.slots.size(), 0);
    std::vector<output::FixedRegion> tail = output::crc_tail(layout, crcs);
    EXPECT_EQ(tail.size(), 10u - 2u + 1u);  // 8 non-empty storages + the directory

    // The placements a streaming writer uses: the same regions, each from the CRCs it needs.
    for (std::size_t s = 0; s < crcs.size(); ++s)
        crcs[s] = 0x1000u + static_cast<std::uint32_t>(s) * 77u;
    tail = output::crc_tail(layout, crcs);
    std::vector<output::TailPlacement> placements = output::crc_tail_placements(layout);
    ASSERT_EQ(placements.size(), tail.size());
    for (std::size_t i = 0; i < tail.size(); ++i) {
        EXPECT_EQ(placements[i].offset, tail[i].offset);
        EXPECT_EQ(placements[i].length, tail[i].bytes.size());
        EXPECT_EQ(placements[i].slot < 0, i + 1 == tail.size());
        std::vector<std::uint32_t> needed(crcs.size(), 0);
        if (placements[i].slot >= 0)
            needed[static_cast<std::size_t>(placements[i].slot)] =
                crcs[static_cast<std::size_t>(placements[i].slot)];
        else
            needed = crcs;
        EXPECT_EQ(output::crc_tail_bytes(layout, placements[i], needed), tail[i].bytes) << i;
    }
}

TEST(TorchBinLayout, EmptyFileAndManyTensors) {
    plan::TensorPlan plan;
    output::OutputFileLayout none = output::layout_torch_bin_file("e.bin", plan, {});
    std::vector<std::byte> file = test::realize_torch_layout_in_memory(none, nullptr);
    test::ZipArchiveInfo info = test::inspect_zip(test::bytes_source(file), file.size());
    EXPECT_EQ(info.records.size(), 3u);
    EXPECT_EQ(test::repr(test::load_pickle(
                  std::span(file).subspan(info.records[0].data_offset, info.records[0].size))),
              "{}");

    for (int i = 0; i < 2500; ++i) {
        plan::PlannedTensor t;
        t.name = "layers." + std::to_string(i) + ".weight";
        t.shape = {static_cast<std::uint64_t>(i % 3)};
        plan.tensors.push_back(t);
    }
    output::OutputFileLayout many =
        output::layout_torch_bin_file("many.bin", plan, all_indices(plan));
    EXPECT_EQ(many.slots.size(), 2500u);
    std::vector<std::byte> big = test::realize_torch_layout_in_memory(
        many, [&](const output::TensorSlot& slot) { return std::vector<std::byte>(slot.length); });
    test::ZipArchiveInfo big_info = test::inspect_zip(test::bytes_source(big), big.size());
    test::check_crcs(test::bytes_source(big), big_info);
    EXPECT_EQ(big_info.records.size(), 2503u);
    std::vector<std::string> order;
    auto tensors = pickled_tensors(
        std::span(big).subspan(big_info.records[0].data_offset, big_info.records[0].size), &order);
    ASSERT_EQ(order.size(), 2500u);
    EXPECT_EQ(order[2499], "layers.2499.weight");
    EXPECT_EQ(tensors["layers.2499.weight"].key, "2499");
}

// A 5 GiB bf16 tensor: checked by arithmetic and by parsing the header regions only; no byte of
// tensor data is allocated.
TEST(TorchBinLayout, Zip64ForHugeTensors) {
    plan::TensorPlan plan;
    auto add = [&](std::string name, std::vector<std::uint64_t> shape, DType dtype) {
        plan::PlannedTensor t;
        t.name = std::move(name);
        t.shape = std::move(shape);
        t.output_dtype = dtype;
        plan.tensors.push_back(t);
    };
    const std::uint64_t huge_numel = std::uint64_t{5} << 29;  // 2.68e9 elements: LONG1 numel
    add("small", {4}, DType::kF32);
    add("huge", {huge_numel}, DType::kBF16);
    add("after", {2, 2}, DType::kF32);
    output::OutputFileLayout layout =
        output::layout_torch_bin_file("big.bin", plan, all_indices(plan));
    ASSERT_EQ(layout.zip_entries.size(), 6u);
    const output::ZipEntry& huge = layout.zip_entries[3];
    const output::ZipEntry& after = layout.zip_entries[4];
    const output::ZipEntry& version = layout.zip_entries[5];
    EXPECT_EQ(huge.name, "big/data/1");
    EXPECT_EQ(huge.size, std::uint64_t{5} << 30);
    EXPECT_LT(huge.local_header_offset, container::zip::kZip64Limit);
    EXPECT_GE(after.local_header_offset, container::zip::kZip64Limit);
    EXPECT_GE(version.local_header_offset, container::zip::kZip64Limit);
    for (const output::ZipEntry& e : layout.zip_entries)
        EXPECT_EQ(e.data_offset % 64, 0u);

    // huge: zip64 sizes in the local header, 24-byte descriptor; after: zip64 offset.
    container::zip::RecordPlacement p_huge =
        container::zip::place_record(huge.local_header_offset, huge.name, huge.size);
    EXPECT_TRUE(p_huge.zip64_size());
    EXPECT_FALSE(p_huge.zip64_offset());
    EXPECT_EQ(p_huge.descriptor_size(), 24u);
    EXPECT_EQ(after.local_header_offset, p_huge.end_offset());
    container::zip::RecordPlacement p_after =
        container::zip::place_record(after.local_header_offset, after.name, after.size);
    EXPECT_TRUE(p_after.zip64_offset());
    EXPECT_FALSE(p_after.zip64_size());
    EXPECT_EQ(p_after.descriptor_size(), 24u);

    // Parse the archive from its fixed and tail regions; slot bytes read as zeros.
    std::vector<std::uint32_t> crcs = {0x11111111, 0x22222222, 0x33333333};
    std::vector<output::FixedRegion> tail = output::crc_tail(layout, crcs);
    expect_tiling(layout, tail);
    std::vector<const output::FixedRegion*> regions;
    for (const auto& r : layout.fixed)
        regions.push_back(&r);
    for (const auto& r : tail)
        regions.push_back(&r);
    test::ByteSource sparse = [&](std::uint64_t offset, std::size_t size) {
        std::vector<std::byte> out(size);
        std::uint64_t covered = 0;
        for (const output::FixedRegion* r : regions) {
            std::uint64_t begin = std::max(offset, r->offset);
            std::uint64_t end = std::min(offset + size, r->offset + r->bytes.size());
            for (std::uint64_t at = begin; at < end; ++at) {
                out[at - offset] = r->bytes[at - r->offset];
                ++covered;
            }
        }
        for (const output::TensorSlot& s : layout.slots) {
            std::uint64_t begin = std::max(offset, s.offset);
            std::uint64_t end = std::min(offset + size, s.offset + s.length);
            if (end > begin)
                covered += end - begin;
        }
        if (covered != size)
            throw std::runtime_error("read of bytes no region covers");
        return out;
    };
    test::ZipArchiveInfo info = test::inspect_zip(sparse, layout.size);
    ASSERT_EQ(info.records.size(), 6u);
    EXPECT_TRUE(info.records[3].local_zip64);
    EXPECT_TRUE(info.records[3].central_zip64);
    EXPECT_EQ(info.records[3].crc, 0x22222222u);
    EXPECT_TRUE(info.records[4].central_zip64);
    EXPECT_EQ(info.records[4].crc, 0x33333333u);
    EXPECT_FALSE(info.records[2].central_zip64);
    EXPECT_GT(info.cd_offset, container::zip::kZip64Limit);  // classic end record holds 0xFFFFFFFF

    // The pickle names the 2.68e9-element storage with LONG1.
    std::vector<std::byte> pkl =
        sparse(layout.zip_entries[0].data_offset, layout.zip_entries[0].size);
    auto tensors = pickled_tensors(pkl);
    EXPECT_EQ(tensors["huge"].numel, static_cast<std::int64_t>(huge_numel));
    std::map<std::uint8_t, std::size_t> ops;
    test::load_pickle(pkl, &ops);
    EXPECT_EQ(ops[0x8a], 2u);  // numel and size
}

TEST(TorchBinLayout, RejectsBadInput) {
    plan::TensorPlan plan = test::sample_plan();
    auto kind_of = [&](std::vector<std::uint32_t> indices) {
        try {
            output::layout_torch_bin_file("m.bin", plan, indices);
        } catch (const Error& error) {
            return error.kind();
        }
        return ErrorKind::kInput;  // "no error" marker for the test
    };
    EXPECT_EQ(kind_of({0, 0}), ErrorKind::kInternal);  // listed twice
    EXPECT_EQ(kind_of({99}), ErrorKind::kInternal);    // out of range
    plan.tensors[10].shape = {5, 3, 1, 2};             // alias bigger than its owner
    EXPECT_EQ(kind_of({0, 10}), ErrorKind::kInternal);
    plan.tensors[10].shape = {3, 5};
    plan.tensors[3].output_dtype = DType::kU16;  // no typed storage
    EXPECT_EQ(kind_of({3}), ErrorKind::kUnsupported);
    plan.tensors[10].alias_of = 10;  // cyclic
    EXPECT_EQ(kind_of({10}), ErrorKind::kInternal);

    plan::TensorPlan ok = test::sample_plan();
    output::OutputFileLayout layout = output::layout_torch_bin_file("m.bin", ok, all_indices(ok));
    std::vector<std::uint32_t> too_few(3);
    EXPECT_THROW(output::crc_tail(layout, too_few), Error);
}

}  // namespace
}  // namespace z2f
