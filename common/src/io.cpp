// readFile / writeFileAtomic / sha256: small, dependency-free I/O used by all tools.
#include "xalloc/io.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xalloc/error.h"

namespace xalloc {

namespace {

// A file opened for reading, closed when it goes; a read that fails is an InputError naming it
// (/proc/self/mem at offset 0: EIO), an interrupted one is retried. read() gives 0 at the end.
class ReadOnlyFile {
public:
  explicit ReadOnlyFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0)
      throw InputError(path, std::string("cannot open file: ") + std::strerror(errno));
  }
  ~ReadOnlyFile() { ::close(fd_); }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  std::size_t read(void* into, std::size_t n) const {
    for (;;) {
      const ssize_t got = ::read(fd_, into, n);
      if (got >= 0)
        return static_cast<std::size_t>(got);
      if (errno != EINTR)
        throw InputError(path_, std::string("cannot read file: ") + std::strerror(errno));
    }
  }

private:
  const std::string& path_;
  int fd_;
};

} // namespace

std::string readFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(path, std::string("cannot read file: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw InputError(path, "is a directory, expected a file");
  const ReadOnlyFile file(path);
  // Read straight into the string, sized from the file (one byte more, so that the read that
  // finds the end needs no growth): a model of 500 MB read through a stream iterator spent
  // seconds growing and copying its buffer.
  std::string data;
  data.resize(S_ISREG(st.st_mode) && st.st_size > 0 ? static_cast<std::size_t>(st.st_size) + 1
                                                    : std::size_t{1} << 16);
  std::size_t n = 0;
  for (;;) {
    if (n == data.size())
      data.resize(2 * data.size());
    const std::size_t got = file.read(data.data() + n, data.size() - n);
    if (got == 0)
      break;
    n += got;
  }
  data.resize(n);
  return data;
}

bool isRegularFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string selfExePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string selfDir() {
  const std::string exe = selfExePath();
  const auto slash = exe.rfind('/');
  return slash == std::string::npos ? std::string(".") : exe.substr(0, slash);
}

int execBeside(const std::string& tool, const std::string& name, char** argv) {
  const std::string path = selfDir() + "/" + name;
  ::execv(path.c_str(), argv);
  std::fprintf(stderr, "%s: error: cannot run %s: %s\n", tool.c_str(), path.c_str(),
               std::strerror(errno));
  return 2;
}

namespace {
// write(2) until all of `content` is written; false (errno set) on failure.
bool writeAll(int fd, std::string_view content) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}
} // namespace

// Temp files in flight, for the signal handlers: fixed slots, each a path and a state (0 free,
// 1 being filled, 2 set), so a handler reads only what is complete, with no allocation.
namespace {
constexpr int kTempSlots = 64;
struct TempSlot {
  std::atomic<int> state{0};
  char path[4096];
};
TempSlot g_temp[kTempSlots];
std::atomic<bool> g_handlers{false};

int registerTemp(const std::string& path) {
  if (path.size() >= sizeof(TempSlot::path))
    return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = 0;
    if (g_temp[i].state.compare_exchange_strong(expected, 1)) {
      std::memcpy(g_temp[i].path, path.c_str(), path.size() + 1);
      g_temp[i].state.store(2);
      return i;
    }
  }
  return -1; // too many at once: not removed on a signal, still removed on failure
}

void unregisterTemp(int slot) {
  if (slot >= 0)
    g_temp[slot].state.store(0);
}

extern "C" void removeTempsAndDie(int sig) {
  for (auto& t : g_temp)
    if (t.state.load() == 2)
      ::unlink(t.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Where a link leads: its target, followed while it is a link (at most 40 times, as the
// kernel), relative targets taken from the link's folder. A path that is no link is itself.
std::string followLinks(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int i = 0; i < 40; ++i) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec)))
      return p.string();
    fs::path target = fs::read_symlink(p, ec);
    if (ec)
      throw InputError(path, "cannot read the link: " + ec.message());
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw InputError(path, "too many levels of symbolic links");
}

// The file a write to `path` lands in: `path` itself, or the file its links lead to (created
// when the last link dangles).
std::string resolveOutput(const std::string& path) {
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode))
    return path;
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf))
    return buf;
  return followLinks(path);
}

std::string folderOf(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// After a rename, the folder's entry reaches the disk too.
void syncFolder(const std::string& path) {
  const int fd = ::open(folderOf(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return;
  (void)::fsync(fd);
  ::close(fd);
}
} // namespace

void removeTempFilesOnSignals() {
  if (g_handlers.exchange(true))
    return;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN)
      continue; // ignored (nohup): stays ignored
    struct sigaction sa {};
    sa.sa_handler = removeTempsAndDie;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

TempFile::TempFile(const std::string& stem) {
  const char* dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/" + stem + ".XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw InputError(tmpl, std::string("cannot create temporary file: ") + std::strerror(errno));
  ::close(fd);
  path_ = tmpl;
  slot_ = registerTemp(path_);
}

TempFile::~TempFile() {
  ::unlink(path_.c_str());
  unregisterTemp(slot_);
}

void checkOutputPath(const std::string& given) {
  if (given.empty() || given == "-")
    return;
  struct stat st {};
  if (::stat(given.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw InputError(given, "is a directory; name a file to write");
    if (::access(given.c_str(), W_OK) != 0)
      throw InputError(given, std::string("cannot write: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      return; // a device or a pipe: written in place
  }
  const std::string folder = folderOf(resolveOutput(given));
  struct stat dst {};
  if (::stat(folder.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
    throw InputError(given, "cannot write: folder '" + folder + "' does not exist");
  if (::access(folder.c_str(), W_OK) != 0)
    throw InputError(given, "cannot write: folder '" + folder + "': " + std::strerror(errno));
}

bool samePath(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb))
    return fs::equivalent(a, b, ea);
  const fs::path ca = fs::weakly_canonical(resolveOutput(a), ea);
  const fs::path cb = fs::weakly_canonical(resolveOutput(b), eb);
  return !ea && !eb && ca == cb;
}

void writeFileAtomic(const std::string& given, std::string_view content) {
  if (given == "-") {
    std::cout.write(content.data(), static_cast<std::streamsize>(content.size()));
    std::cout.flush();
    if (!std::cout)
      throw InputError("<stdout>", "write failed");
    return;
  }
  struct stat st {};
  bool exists = ::stat(given.c_str(), &st) == 0; // through links, as the kernel follows them
  if (exists && S_ISDIR(st.st_mode))
    throw InputError(given, "is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or a pipe (/dev/null, /dev/stdout, a FIFO): written in place. Replacing it with
    // a regular file by rename(2) would destroy it.
    const int fd = ::open(given.c_str(), O_WRONLY);
    if (fd < 0)
      throw InputError(given, std::string("cannot open: ") + std::strerror(errno));
    if (!writeAll(fd, content)) {
      const int err = errno;
      ::close(fd);
      throw InputError(given, std::string("write failed: ") + std::strerror(err));
    }
    ::close(fd);
    return;
  }
  // A link is followed: its target is replaced, the link stays.
  const std::string path = resolveOutput(given);
  exists = ::stat(path.c_str(), &st) == 0;
  // Keep the permissions of a file we replace; a new file gets 0666 minus the umask, like open(2).
  mode_t mode;
  if (exists) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  // The content goes into a file with no name in the output's folder (O_TMPFILE): a process
  // killed while writing (SIGKILL included) leaves nothing behind. It is named next to the
  // output only to be renamed over it at once. Where the file system has no O_TMPFILE, a named
  // temporary file is written instead (removed on SIGINT/SIGTERM/SIGHUP).
  std::string tmpl;
  int slot = -1;
  struct Unregister {
    int& slot;
    ~Unregister() {
      if (slot >= 0)
        unregisterTemp(slot);
    }
  } unregister{slot};
  auto fail = [&](int fd, const char* what, int err) {
    if (fd >= 0)
      ::close(fd);
    if (!tmpl.empty())
      ::unlink(tmpl.c_str());
    throw InputError(given, std::string(what) + std::strerror(err));
  };
  int fd = ::open(folderOf(path).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  const bool anonymous = fd >= 0;
  if (!anonymous) {
    tmpl = path + ".tmp.XXXXXX";
    fd = ::mkstemp(tmpl.data());
    if (fd < 0)
      throw InputError(given, std::string("cannot create temporary file: ") + std::strerror(errno));
    slot = registerTemp(tmpl);
  }
  if (!writeAll(fd, content))
    fail(fd, "write failed: ", errno);
  ::fchmod(fd, mode);
  if (::fsync(fd) != 0)
    fail(fd, "write failed: ", errno);
  if (anonymous) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    for (unsigned attempt = 0;; ++attempt) {
      char suffix[16];
      std::snprintf(suffix, sizeof suffix, ".tmp.%06x",
                    static_cast<unsigned>(std::random_device{}()) & 0xffffffu);
      tmpl = path + suffix;
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmpl.c_str(), AT_SYMLINK_FOLLOW) == 0)
        break;
      const int err = errno;
      if (err != EEXIST || attempt > 64) {
        tmpl.clear();
        fail(fd, "cannot name the written file: ", err);
      }
    }
    slot = registerTemp(tmpl);
  }
  if (::close(fd) != 0)
    fail(-1, "write failed: ", errno);
  if (::rename(tmpl.c_str(), path.c_str()) != 0)
    fail(-1, "cannot replace file: ", errno);
  syncFolder(path);
}

// --- SHA-256 (FIPS 180-4) ------------------------------------------------------------------------
namespace {
constexpr std::array<std::uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline std::uint32_t rotr(std::uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

class Sha256 {
public:
  void update(const unsigned char* data, std::size_t len) {
    total_ += len;
    while (len > 0) {
      if (fill_ == 0 && len >= 64) { // whole blocks straight from the input
        block(data);
        data += 64;
        len -= 64;
        continue;
      }
      std::size_t take = std::min(len, std::size_t{64} - fill_);
      std::memcpy(buf_.data() + fill_, data, take);
      fill_ += take;
      data += take;
      len -= take;
      if (fill_ == 64) {
        block(buf_.data());
        fill_ = 0;
      }
    }
  }
  std::string hex() {
    std::uint64_t bits = total_ * 8;
    unsigned char pad = 0x80;
    update(&pad, 1);
    unsigned char zero = 0;
    while (fill_ != 56)
      update(&zero, 1);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i)
      len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    update(len, 8);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (std::uint32_t v : h_)
      for (int i = 7; i >= 0; --i)
        out += digits[(v >> (4 * i)) & 0xf];
    return out;
  }

private:
  void block(const unsigned char* p) {
    std::uint32_t w[64];
    for (std::size_t i = 0; i < 16; ++i)
      w[i] = (std::uint32_t(p[4 * i]) << 24) | (std::uint32_t(p[4 * i + 1]) << 16) |
             (std::uint32_t(p[4 * i + 2]) << 8) | std::uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6],
                  h = h_[7];
    for (int i = 0; i < 64; ++i) {
      std::uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      std::uint32_t ch = (e & f) ^ (~e & g);
      std::uint32_t t1 = h + S1 + ch + kK[i] + w[i];
      std::uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      std::uint32_t t2 = S0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }
  std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<unsigned char, 64> buf_{};
  std::size_t fill_ = 0;
  std::uint64_t total_ = 0;
};
} // namespace

std::string sha256Hex(std::string_view bytes) {
  Sha256 s;
  s.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  return s.hex();
}

std::string sha256File(const std::string& path) {
  if (path == "-" || !isRegularFile(path))
    return sha256Hex(readFile(path)); // the errors readFile gives, and stdin
  // Streamed through one buffer: a 500 MB model read whole first cost seconds of page faults.
  const ReadOnlyFile file(path);
  Sha256 s;
  std::vector<unsigned char> buf(std::size_t{1} << 20);
  while (const std::size_t got = file.read(buf.data(), buf.size()))
    s.update(buf.data(), got);
  return s.hex();
}

} // namespace xalloc
