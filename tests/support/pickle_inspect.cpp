#include "support/pickle_inspect.hpp"

#include <bit>
#include <charconv>
#include <map>
#include <stdexcept>

namespace z2f::test {
namespace {

class Machine {
  public:
    Machine(std::span<const std::byte> data, std::map<std::uint8_t, std::size_t>* counts)
        : data_(data), counts_(counts) {}

    PyRef run() {
        for (;;) {
            std::size_t at = pos_;
            std::uint8_t op = u8();
            if (counts_ != nullptr)
                ++(*counts_)[op];
            switch (op) {
                case 0x80:
                    if (u8() != 2)
                        fail(at, "protocol is not 2");
                    break;
                case '.':
                    if (stack_.size() != 1 || !marks_.empty())
                        fail(at, "unbalanced stack at STOP");
                    if (pos_ != data_.size())
                        fail(at, "bytes after STOP");
                    return stack_.back();
                case 'N':
                    push(make(PyNode::Kind::kNone));
                    break;
                case 0x88:
                case 0x89: {
                    auto node = make(PyNode::Kind::kBool);
                    node->integer = op == 0x88 ? 1 : 0;
                    push(node);
                    break;
                }
                case 'K':
                    push_int(u8());
                    break;
                case 'M':
                    push_int(static_cast<std::int64_t>(le(2)));
                    break;
                case 'J':
                    push_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))));
                    break;
                case 0x8a: {
                    std::size_t n = u8();
                    if (n == 0 || n > 8)
                        fail(at, "LONG1 length outside 1..8");
                    std::uint64_t raw = le(n);
                    if (n < 8 && (raw >> (8 * n - 1)) != 0) {
                        raw |= ~std::uint64_t{0} << (8 * n);  // sign-extend
                    }
                    push_int(static_cast<std::int64_t>(raw));
                    break;
                }
                case 'G': {
                    std::uint64_t bits = 0;
                    for (int i = 0; i < 8; ++i)
                        bits = (bits << 8) | u8();
                    auto node = make(PyNode::Kind::kFloat);
                    node->real = std::bit_cast<double>(bits);
                    push(node);
                    break;
                }
                case 'X': {
                    auto node = make(PyNode::Kind::kStr);
                    node->text = text(le(4));
                    push(node);
                    break;
                }
                case 'c': {
                    auto node = make(PyNode::Kind::kGlobal);
                    node->text = line();
                    node->name = line();
                    push(node);
                    break;
                }
                case ')':
                    push(make(PyNode::Kind::kTuple));
                    break;
                case ']':
                    push(make(PyNode::Kind::kList));
                    break;
                case '}':
                    push(make(PyNode::Kind::kDict));
                    break;
                case '(':
                    marks_.push_back(stack_.size());
                    break;
                case 0x85:
                case 0x86:
                case 0x87: {
                    std::size_t n = op - 0x84u;
                    auto node = make(PyNode::Kind::kTuple);
                    node->items = pop_n(at, n);
                    push(node);
                    break;
                }
                case 't': {
                    auto node = make(PyNode::Kind::kTuple);
                    node->items = pop_mark(at);
                    push(node);
                    break;
                }
                case 's': {
                    auto pair = pop_n(at, 2);
                    add_items(at, top(at), pair);
                    break;
                }
                case 'u': {
                    auto items = pop_mark(at);
                    if (items.size() % 2 != 0)
                        fail(at, "odd SETITEMS");
                    add_items(at, top(at), items);
                    break;
                }
                case 'a':
                case 'e': {
                    auto items = op == 'a' ? pop_n(at, 1) : pop_mark(at);
                    PyRef list = top(at);
                    if (list->kind != PyNode::Kind::kList)
                        fail(at, "APPEND to a non-list");
                    list->items.insert(list->items.end(), items.begin(), items.end());
                    break;
                }
                case 'R':
                case 0x81: {
                    auto parts = pop_n(at, 2);
                    if (parts[1]->kind != PyNode::Kind::kTuple)
                        fail(at, "arguments not a tuple");
                    auto node = make(op == 'R' ? PyNode::Kind::kCall : PyNode::Kind::kNewObj);
                    node->items = parts;
                    push(node);
                    break;
                }
                case 'b': {
                    auto state = pop_n(at, 1);
                    top(at)->state = state[0];
                    break;
                }
                case 'Q': {
                    auto node = make(PyNode::Kind::kPersId);
                    node->items = pop_n(at, 1);
                    push(node);
                    break;
                }
                case 'q':
                    memo_[u8()] = top(at);
                    break;
                case 'r':
                    memo_[static_cast<std::uint32_t>(le(4))] = top(at);
                    break;
                case 'h':
                case 'j': {
                    std::uint32_t index = op == 'h' ? u8() : static_cast<std::uint32_t>(le(4));
                    auto it = memo_.find(index);
                    if (it == memo_.end())
                        fail(at, "BINGET of an unset memo entry");
                    push(it->second);
                    break;
                }
                default:
                    fail(at, "unknown opcode " + std::to_string(op));
            }
        }
    }

  private:
    [[noreturn]] static void fail(std::size_t at, const std::string& what) {
        throw std::runtime_error("pickle offset " + std::to_string(at) + ": " + what);
    }
    static PyRef make(PyNode::Kind kind) {
        auto node = std::make_shared<PyNode>();
        node->kind = kind;
        return node;
    }
    std::uint8_t u8() {
        if (pos_ >= data_.size())
            fail(pos_, "truncated");
        return std::to_integer<std::uint8_t>(data_[pos_++]);
    }
    std::uint64_t le(std::size_t n) {
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < n; ++i)
            value |= std::uint64_t{u8()} << (8 * i);
        return value;
    }
    std::string text(std::uint64_t n) {
        if (n > data_.size() - pos_)
            fail(pos_, "string runs past the end");
        std::string out(reinterpret_cast<const char*>(data_.data() + pos_), n);
        pos_ += n;
        return out;
    }
    std::string line() {
        std::string out;
        for (char c; (c = static_cast<char>(u8())) != '\n';)
            out.push_back(c);
        return out;
    }
    void push(PyRef node) { stack_.push_back(std::move(node)); }
    void push_int(std::int64_t value) {
        auto node = make(PyNode::Kind::kInt);
        node->integer = value;
        push(node);
    }
    std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
    PyRef top(std::size_t at) {
        if (stack_.size() <= floor())
            fail(at, "stack empty");
        return stack_.back();
    }
    std::vector<PyRef> pop_n(std::size_t at, std::size_t n) {
        if (stack_.size() < floor() + n)
            fail(at, "stack underflow");
        std::vector<PyRef> out(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        return out;
    }
    std::vector<PyRef> pop_mark(std::size_t at) {
        if (marks_.empty())
            fail(at, "no MARK");
        std::size_t mark = marks_.back();
        marks_.pop_back();
        std::vector<PyRef> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        return out;
    }
    static void add_items(std::size_t at, const PyRef& target, const std::vector<PyRef>& items) {
        if (target->kind == PyNode::Kind::kDict) {
            target->items.insert(target->items.end(), items.begin(), items.end());
        } else if (target->kind == PyNode::Kind::kCall || target->kind == PyNode::Kind::kNewObj) {
            target->dict_items.insert(target->dict_items.end(), items.begin(), items.end());
        } else {
            fail(at, "SETITEM on a non-mapping");
        }
    }

    std::span<const std::byte> data_;
    std::map<std::uint8_t, std::size_t>* counts_;
    std::size_t pos_ = 0;
    std::vector<PyRef> stack_;
    std::vector<std::size_t> marks_;
    std::map<std::uint32_t, PyRef> memo_;
};

std::string join(const std::vector<PyRef>& items, std::size_t step) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); i += step) {
        if (i > 0)
            out += ", ";
        out += repr(items[i]);
        if (step == 2)
            out += ": " + repr(items[i + 1]);
    }
    return out;
}

}  // namespace

PyRef load_pickle(std::span<const std::byte> data,
                  std::map<std::uint8_t, std::size_t>* opcode_counts) {
    return Machine(data, opcode_counts).run();
}

// Built with appends: GCC 12 reports false -Wrestrict positives for `"(" + std::string` chains.
std::string repr(const PyRef& node) {
    std::string out;
    auto wrap = [&](const char* open, const std::string& inner, const char* close) {
        out.append(open).append(inner).append(close);
    };
    switch (node->kind) {
        case PyNode::Kind::kNone:
            out = "None";
            break;
        case PyNode::Kind::kBool:
            out = node->integer ? "True" : "False";
            break;
        case PyNode::Kind::kInt:
            out = std::to_string(node->integer);
            break;
        case PyNode::Kind::kFloat: {
            char buffer[64];
            auto result = std::to_chars(buffer, buffer + sizeof(buffer), node->real);
            out.assign(buffer, result.ptr);
            break;
        }
        case PyNode::Kind::kStr:
            wrap("'", node->text, "'");
            break;
        case PyNode::Kind::kTuple:
            wrap("(", join(node->items, 1), node->items.size() == 1 ? ",)" : ")");
            break;
        case PyNode::Kind::kList:
            wrap("[", join(node->items, 1), "]");
            break;
        case PyNode::Kind::kDict:
            wrap("{", join(node->items, 2), "}");
            break;
        case PyNode::Kind::kGlobal:
            out.append(node->text).append(".").append(node->name);
            break;
        case PyNode::Kind::kCall:
        case PyNode::Kind::kNewObj:
            out = repr(node->items[0]);
            wrap(node->kind == PyNode::Kind::kCall ? "(" : ".__new__(",
                 join(node->items[1]->items, 1), ")");
            if (!node->dict_items.empty())
                wrap("{", join(node->dict_items, 2), "}");
            if (node->state)
                wrap(".__setstate__(", repr(node->state), ")");
            break;
        case PyNode::Kind::kPersId:
            wrap("persid(", repr(node->items[0]), ")");
            break;
    }
    return out;
}

}  // namespace z2f::test
