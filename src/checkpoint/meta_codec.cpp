#include "checkpoint/meta_codec.hpp"

#include "common/bytes.hpp"
#include "zero2fp32/error.hpp"

namespace z2f {
namespace {

class Encoder {
  public:
    explicit Encoder(std::vector<std::byte>& out) : out_(out) {}
    void u8(std::uint8_t v) { out_.push_back(static_cast<std::byte>(v)); }
    void u32(std::uint32_t v) { put(v); }
    void u64(std::uint64_t v) { put(v); }
    void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v)); }
    void str(const std::string& s) {
        u64(s.size());
        for (char c : s)
            out_.push_back(static_cast<std::byte>(c));
    }
    void dims(const std::vector<std::uint64_t>& v) {
        u64(v.size());
        for (auto d : v)
            u64(d);
    }
    void tensor(const TensorRef& t) {
        u32(t.file);
        u8(static_cast<std::uint8_t>(t.dtype));
        dims(t.shape);
        u64(t.numel);
        u64(t.offset);
        u64(t.length);
    }
    void named_tensors(const std::vector<NamedTensor>& v) {
        u64(v.size());
        for (const auto& n : v) {
            str(n.name);
            tensor(n.tensor);
        }
    }
    void shapes(const std::vector<NamedShape>& v) {
        u64(v.size());
        for (const auto& n : v) {
            str(n.name);
            dims(n.shape);
        }
    }
    void groups(const std::optional<std::vector<std::vector<NamedShape>>>& g) {
        u8(g.has_value());
        if (g) {
            u64(g->size());
            for (const auto& group : *g)
                shapes(group);
        }
    }

  private:
    template <typename T>
    void put(T v) {
        std::size_t at = out_.size();
        out_.resize(at + sizeof(T));
        store_le<T>(out_.data() + at, v);
    }
    std::vector<std::byte>& out_;
};

class Decoder {
  public:
    Decoder(std::span<const std::byte> bytes, std::size_t& pos) : bytes_(bytes), pos_(pos) {}
    std::uint8_t u8() { return std::to_integer<std::uint8_t>(take(1)[0]); }
    std::uint32_t u32() { return load_le<std::uint32_t>(take(4).data()); }
    std::uint64_t u64() { return load_le<std::uint64_t>(take(8).data()); }
    std::int64_t i64() { return static_cast<std::int64_t>(u64()); }
    std::size_t count(std::size_t min_element_bytes) {
        std::uint64_t n = u64();
        if (n > (bytes_.size() - pos_) / std::max<std::size_t>(min_element_bytes, 1)) {
            throw_internal_error("corrupt metadata exchange buffer (count)");
        }
        return static_cast<std::size_t>(n);
    }
    std::string str() {
        std::size_t n = count(1);
        auto span = take(n);
        return std::string(reinterpret_cast<const char*>(span.data()), n);
    }
    std::vector<std::uint64_t> dims() {
        std::vector<std::uint64_t> v(count(8));
        for (auto& d : v)
            d = u64();
        return v;
    }
    TensorRef tensor() {
        TensorRef t;
        t.file = u32();
        t.dtype = static_cast<DType>(u8());
        t.shape = dims();
        t.numel = u64();
        t.offset = u64();
        t.length = u64();
        return t;
    }
    std::vector<NamedTensor> named_tensors() {
        std::vector<NamedTensor> v(count(8));
        for (auto& n : v) {
            n.name = str();
            n.tensor = tensor();
        }
        return v;
    }
    std::vector<NamedShape> shapes() {
        std::vector<NamedShape> v(count(16));
        for (auto& n : v) {
            n.name = str();
            n.shape = dims();
        }
        return v;
    }
    std::optional<std::vector<std::vector<NamedShape>>> groups() {
        if (u8() == 0)
            return std::nullopt;
        std::vector<std::vector<NamedShape>> g(count(8));
        for (auto& group : g)
            group = shapes();
        return g;
    }

  private:
    std::span<const std::byte> take(std::size_t n) {
        if (n > bytes_.size() - pos_) {
            throw_internal_error("corrupt metadata exchange buffer (truncated)");
        }
        auto span = bytes_.subspan(pos_, n);
        pos_ += n;
        return span;
    }
    std::span<const std::byte> bytes_;
    std::size_t& pos_;
};

}  // namespace

void encode_file_meta(const FileMeta& meta, std::vector<std::byte>& out) {
    Encoder e(out);
    e.u64(meta.size);
    if (const auto* model = std::get_if<ModelStatesInfo>(&meta.info)) {
        e.u8(0);
        e.str(model->ds_version);
        e.u8(model->module_is_none);
        e.named_tensors(model->module_tensors);
        e.u8(model->has_buffer_names);
        e.u64(model->buffer_names.size());
        for (const auto& name : model->buffer_names)
            e.str(name);
        e.groups(model->param_shapes);
        e.u8(model->frozen_param_shapes.has_value());
        if (model->frozen_param_shapes)
            e.shapes(*model->frozen_param_shapes);
        e.named_tensors(model->frozen_param_fragments);
        e.u8(model->shared_params.has_value());
        if (model->shared_params) {
            e.u64(model->shared_params->size());
            for (const auto& [alias, owner] : *model->shared_params) {
                e.str(alias);
                e.str(owner);
            }
        }
        e.i64(model->dp_world_size);
        e.i64(model->mp_world_size);
        e.i64(model->tp_degree);
        e.i64(model->pp_degree);
        e.u8(model->autoep_zero3);
    } else {
        const auto& optim = std::get<OptimStatesInfo>(meta.info);
        e.u8(1);
        e.str(optim.ds_version);
        e.u8(static_cast<std::uint8_t>(optim.layout));
        e.i64(optim.zero_stage);
        e.u64(optim.partition_count.size());
        for (auto v : optim.partition_count)
            e.i64(v);
        e.u64(optim.master.size());
        for (const auto& t : optim.master)
            e.tensor(t);
        e.groups(optim.param_shapes);
        e.u64(optim.subgroup_partition_counts.size());
        for (auto v : optim.subgroup_partition_counts)
            e.i64(v);
    }
}

FileMeta decode_file_meta(std::span<const std::byte> bytes, std::size_t& pos) {
    Decoder d(bytes, pos);
    FileMeta meta;
    meta.size = d.u64();
    if (d.u8() == 0) {
        ModelStatesInfo model;
        model.ds_version = d.str();
        model.module_is_none = d.u8() != 0;
        model.module_tensors = d.named_tensors();
        model.has_buffer_names = d.u8() != 0;
        model.buffer_names.resize(d.count(8));
        for (auto& name : model.buffer_names)
            name = d.str();
        model.param_shapes = d.groups();
        if (d.u8() != 0)
            model.frozen_param_shapes = d.shapes();
        model.frozen_param_fragments = d.named_tensors();
        if (d.u8() != 0) {
            std::vector<std::pair<std::string, std::string>> pairs(d.count(16));
            for (auto& [alias, owner] : pairs) {
                alias = d.str();
                owner = d.str();
            }
            model.shared_params = std::move(pairs);
        }
        model.dp_world_size = d.i64();
        model.mp_world_size = d.i64();
        model.tp_degree = d.i64();
        model.pp_degree = d.i64();
        model.autoep_zero3 = d.u8() != 0;
        meta.info = std::move(model);
    } else {
        OptimStatesInfo optim;
        optim.ds_version = d.str();
        optim.layout = static_cast<MasterLayout>(d.u8());
        optim.zero_stage = d.i64();
        optim.partition_count.resize(d.count(8));
        for (auto& v : optim.partition_count)
            v = d.i64();
        optim.master.resize(d.count(8));
        for (auto& t : optim.master)
            t = d.tensor();
        optim.param_shapes = d.groups();
        optim.subgroup_partition_counts.resize(d.count(8));
        for (auto& v : optim.subgroup_partition_counts)
            v = d.i64();
        meta.info = std::move(optim);
    }
    return meta;
}

}  // namespace z2f
