// Helpers shared by the tests: temporary directories, whole-file reads and writes, and access to
// the bundled fixtures (tests/data/deepspeed, see tests/data/deepspeed/PROVENANCE.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace z2f::testing {

// Root of the bundled fixtures: <repo>/tests/data/deepspeed.
std::string fixture_root();
std::string fixture_path(const std::string& relative);

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const noexcept { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

std::vector<std::byte> read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, const std::vector<std::byte>& bytes);
void write_text_file(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);
// Copies a directory tree (regular files, directories, symlinks as links).
void copy_tree(const std::string& from, const std::string& to);
// Every regular file under `root` whose name ends with `suffix`, sorted.
std::vector<std::string> find_files(const std::string& root, const std::string& suffix);

}  // namespace z2f::testing
