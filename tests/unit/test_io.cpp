// common/io: SHA-256, and the one atomic writer every output goes through (temp file and
// rename; devices and pipes written in place).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc/error.h"
#include "xalloc/io.h"

using namespace xalloc;

TEST(Io, Sha256KnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(Io, AtomicWriteReplacesAndLeavesNoTemporary) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xalloc_io_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string path = (dir / "out.json").string();
  writeFileAtomic(path, "first\n");
  writeFileAtomic(path, "second\n");
  EXPECT_EQ(readFile(path), "second\n");
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_THROW(writeFileAtomic((dir / "missing" / "x.json").string(), "x"), InputError);
  EXPECT_THROW(readFile((dir / "nope.json").string()), InputError);
  EXPECT_THROW(readFile(dir.string()), InputError);
  fs::remove_all(dir);
}

// `-o /dev/null` or a named pipe: written in place, never replaced by a regular file (as root,
// a rename over /dev/null would replace the device).
TEST(Io, AtomicWriteLeavesDevicesAndPipesInPlace) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xalloc_fifo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string fifo = (dir / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Held open for reading and writing, the pipe takes the write without a reader thread.
  const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  writeFileAtomic(fifo, "through the pipe\n");
  char buf[64] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0), "through the pipe\n");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_THROW(writeFileAtomic(dir.string(), "x"), InputError); // a directory
  fs::remove_all(dir);
}

// A link is followed (its target replaced, the link kept, a dangling one's target made); a
// replaced file keeps its mode; paths are compared as files, not strings; outputs are checked
// before any work; a TempFile goes when it goes out of scope.
TEST(Io, OneWriterForEveryOutput) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("xalloc_links_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  const std::string target = (dir / "sub" / "real.json").string();
  const std::string link = (dir / "link.json").string();
  fs::create_symlink("sub/real.json", link); // relative, and dangling at first
  writeFileAtomic(link, "one\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(readFile(target), "one\n");
  ::chmod(target.c_str(), 0600);
  writeFileAtomic(link, "two\n");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(readFile(target), "two\n");
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);

  EXPECT_TRUE(samePath(link, target));
  EXPECT_TRUE(samePath(target, (dir / "sub" / ".." / "sub" / "real.json").string()));
  EXPECT_TRUE(samePath((dir / "new.pt").string(), (dir / "sub" / ".." / "new.pt").string()));
  EXPECT_FALSE(samePath((dir / "new.pt").string(), target));

  EXPECT_NO_THROW(checkOutputPath("-"));
  EXPECT_NO_THROW(checkOutputPath((dir / "fresh.json").string()));
  EXPECT_NO_THROW(checkOutputPath(link));
  EXPECT_THROW(checkOutputPath(dir.string()), InputError);
  EXPECT_THROW(checkOutputPath((dir / "missing" / "x.json").string()), InputError);

  std::string temp;
  {
    TempFile t("xalloc-test");
    temp = t.path();
    EXPECT_TRUE(fs::exists(temp));
  }
  EXPECT_FALSE(fs::exists(temp));
  fs::remove_all(dir);
}
