//===- KernelCache.cpp - the on-disk cache of compiled kernels ------------===//
//
// Plain POSIX calls (mkdir, open/write/fsync, rename) so that every failure keeps its errno: the
// fallback to memory depends on it, and so does the test hook `TESSEL_CACHE_FAULT`, which makes
// the write path fail the way a full or read-only disk would, or kills the process between the
// temporary write and the rename (docs/dev/cache.md lists its values).
//
// The directory may be shared with other users or tampered with (docs/cache.md, "Threat model"):
// below the cache directory itself nothing is ever reached through a path. Every call is made
// relative to a directory descriptor (openat, fstatat, renameat, unlinkat) with O_NOFOLLOW or
// AT_SYMLINK_NOFOLLOW, so a symbolic link is never followed, nothing outside the cache directory
// is ever read or deleted, and an object that is not an entry directory (a link, a FIFO, a
// device, a plain file) under a key's name is moved aside and unlinked as a bad entry.
//
//===----------------------------------------------------------------------===//

#include "tessel/Runtime/KernelCache.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

using namespace tessel::runtime;

namespace {
constexpr const char *kCubin = "kernel.cubin";
constexpr const char *kPtx = "kernel.ptx";
constexpr const char *kManifest = "manifest.json";
/// 2: the manifest carries `manifest_sha256`, the digest of the rest of it.
constexpr int kFormat = 2;
constexpr const char *kManifestDigest = "manifest_sha256";
/// Names of temporary directories (being written) and of entries being deleted.
constexpr const char *kTempPrefix = ".tmp-";
constexpr const char *kTrashPrefix = ".trash-";

/// Bounds checked before a manifest is parsed: llvm::json::parse recurses once per level of
/// nesting, and `[` repeated 50,000 times overflowed the stack of every later load, list, verify
/// and clear. Real manifests are a few KiB, nested 4 deep.
constexpr size_t kMaxManifestBytes = size_t(1) << 20;
constexpr unsigned kMaxManifestDepth = 64;

/// Temporary and trash directories older than this are left by a process that died (a write or
/// a removal takes well under a second); every store removes them. Age, not the pid in the
/// name, decides: a cache shared between hosts or pid namespaces cannot ask whether it lives.
constexpr int64_t kStaleSeconds = 3600;

/// The largest payload file a load reads (cubins and PTX are ~100-150 KB).
constexpr uint64_t kMaxPayloadBytes = uint64_t(256) << 20;

/// One warning per process, whichever KernelCache falls back first.
std::atomic<bool> warnedAboutMemory{false};

std::string join(const std::string &dir, const std::string &name) { return dir + "/" + name; }

/// The faults `TESSEL_CACHE_FAULT` asks for (comma separated), read on every store so that a
/// test can change it between calls.
bool hasFault(llvm::StringRef fault, std::string *value = nullptr) {
  const char *env = std::getenv("TESSEL_CACHE_FAULT");
  if (!env)
    return false;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(env).split(parts, ',', -1, false);
  for (llvm::StringRef part : parts) {
    auto [name, arg] = part.trim().split('=');
    if (name == fault) {
      if (value)
        *value = arg.str();
      return true;
    }
  }
  return false;
}

/// The errno the hook injects into removals (`erofs`, `eacces`), or 0.
int injectedRemoveErrno() {
  if (hasFault("eacces"))
    return EACCES;
  if (hasFault("erofs"))
    return EROFS;
  return 0;
}

/// The errno the hook injects into the first write of the cache directory, or 0.
int injectedDirectoryErrno() {
  if (hasFault("eacces"))
    return EACCES;
  if (hasFault("erofs"))
    return EROFS;
  if (hasFault("enospc"))
    return ENOSPC;
  return 0;
}

/// Writes `data` to a new file `name` of `dirfd` and fsyncs it; 0 or the errno of the failing
/// call.
int writeFileAt(int dirfd, const char *name, const std::string &data, bool failWithNoSpace) {
  int fd = ::openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno;
  size_t done = 0;
  int err = 0;
  // The hook writes half of the file, then fails as a full disk would.
  size_t limit = failWithNoSpace ? data.size() / 2 : data.size();
  while (done < limit) {
    ssize_t n = ::write(fd, data.data() + done, limit - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!err && failWithNoSpace)
    err = ENOSPC;
  if (!err && ::fsync(fd) != 0)
    err = errno;
  if (::close(fd) != 0 && !err)
    err = errno;
  return err;
}

/// A directory descriptor that closes itself.
class Fd {
public:
  explicit Fd(int fd = -1) : fd(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  int get() const { return fd; }
  bool ok() const { return fd >= 0; }
  int release() { return std::exchange(fd, -1); }

private:
  int fd;
};

/// Opens the directory `name` of `dirfd` without following a link (ELOOP or ENOTDIR otherwise).
int openDirectoryAt(int dirfd, const std::string &name) {
  return ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/// The names in the directory `dirfd` (without "." and ".."); the descriptor stays open.
std::vector<std::string> namesIn(int dirfd) {
  std::vector<std::string> out;
  int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0)
    return out;
  DIR *d = ::fdopendir(dup);
  if (!d) {
    ::close(dup);
    return out;
  }
  ::rewinddir(d);
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      out.push_back(name);
  }
  ::closedir(d);
  return out;
}

/// Removes `name` of the directory `dirfd` and, if it is a directory, what it holds; never
/// follows a link (a link, FIFO or device is unlinked itself). Entries hold no subdirectories;
/// anything nested deeper than a few levels is left alone. 0 or the errno of the failing call.
int removeAt(int dirfd, const std::string &name, unsigned depth = 0) {
  // unlink(2) never removes a directory: EISDIR on Linux, EPERM by POSIX.
  if (::unlinkat(dirfd, name.c_str(), 0) == 0 || errno == ENOENT)
    return 0;
  if (errno != EISDIR && errno != EPERM)
    return errno;
  if (depth >= 4)
    return ELOOP;
  Fd dir(openDirectoryAt(dirfd, name));
  if (!dir.ok())
    return errno;
  for (const std::string &child : namesIn(dir.get()))
    removeAt(dir.get(), child, depth + 1);
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return errno;
  return 0;
}

std::string uniqueSuffix() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         llvm::utohexstr((uint64_t(rd()) << 32) | rd(), /*LowerCase=*/true);
}

/// Moves `name` aside (to a `.trash-` name, so no reader ever sees it half deleted) and deletes
/// it; 0 or the errno of the failing rename or removal.
int discardEntry(int rootfd, const std::string &name) {
  std::string trash = kTrashPrefix + name + "-" + uniqueSuffix();
  if (::renameat(rootfd, name.c_str(), rootfd, trash.c_str()) != 0)
    return errno == ENOENT ? 0 : errno;
  return removeAt(rootfd, trash);
}

/// Removes the temporary and trash directories of `rootfd` older than kStaleSeconds.
void sweepStale(int rootfd) {
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const std::string &name : namesIn(rootfd)) {
    llvm::StringRef ref(name);
    if (!ref.starts_with(kTempPrefix) && !ref.starts_with(kTrashPrefix))
      continue;
    struct stat st;
    if (::fstatat(rootfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        now - static_cast<int64_t>(st.st_mtime) > kStaleSeconds)
      removeAt(rootfd, name);
  }
}

/// Bytes of `name` of `dirfd`: its own size, or the sizes of what a directory holds (one level,
/// no link followed).
uint64_t treeBytes(int rootfd, const std::string &name) {
  struct stat st;
  if (::fstatat(rootfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return 0;
  if (!S_ISDIR(st.st_mode))
    return static_cast<uint64_t>(st.st_size);
  Fd dir(openDirectoryAt(rootfd, name));
  if (!dir.ok())
    return 0;
  uint64_t total = 0;
  for (const std::string &child : namesIn(dir.get()))
    if (::fstatat(dir.get(), child.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      total += static_cast<uint64_t>(st.st_size);
  return total;
}

/// What a non-directory object is, for messages.
const char *kindOf(mode_t mode) {
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISREG(mode))
    return "a plain file";
  if (S_ISDIR(mode))
    return "a directory";
  return "not a directory";
}

/// Reads the regular file `name` of the directory `dirfd` whole; returns "" or what is wrong
/// with it, to follow its name in a message. Everything is decided by fstat before one byte is
/// read: anything but a regular file is refused without being opened (a FIFO would block the
/// open or the read forever, a link is not followed), so is a file larger than `limit`, and, when
/// `expected` >= 0, a file of another size (a 10 GB sparse file costs nothing).
std::string readRegularFile(int dirfd, const char *name, uint64_t limit, int64_t expected,
                            std::string &out) {
  out.clear();
  struct stat st;
  if (::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? "is missing"
                           : "cannot be read (" + std::string(std::strerror(errno)) + ")";
  if (!S_ISREG(st.st_mode))
    return std::string("is ") + kindOf(st.st_mode) + ", not a file";
  // O_NONBLOCK: should a FIFO take the file's place after the fstatat, opening it does not wait
  // for a writer; the fstat below then refuses it.
  Fd file(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!file.ok())
    return "cannot be opened (" + std::string(std::strerror(errno)) + ")";
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return "is not a regular file";
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > limit)
    return "is larger than " + std::to_string(limit) + " bytes (" + std::to_string(size) + ")";
  if (expected >= 0 && size != static_cast<uint64_t>(expected))
    return "has " + std::to_string(size) + " bytes, the manifest says " + std::to_string(expected);
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(file.get(), out.data() + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return "cannot be read (" + std::string(std::strerror(errno)) + ")";
    if (n == 0)
      return "changed while being read";
    done += static_cast<size_t>(n);
  }
  return {};
}

/// The digest that covers a whole manifest: SHA-256 of its compact JSON (LLVM prints object keys
/// sorted) without the digest itself. Launch fields, ingredients and payload checksums are all
/// under it, so an edited field is a bad entry, not a hit.
std::string manifestDigest(const llvm::json::Object &manifest) {
  llvm::json::Object rest(manifest);
  rest.erase(kManifestDigest);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(rest));
  os.flush();
  return tessel::runtime::sha256Hex(text);
}

/// The deepest nesting of arrays and objects in the JSON `text` (brackets inside strings do not
/// count), counted without recursion and only up to `limit` + 1.
unsigned jsonDepth(llvm::StringRef text, unsigned limit) {
  unsigned depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit)
        return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

/// Parses manifest (or metadata) JSON once its size and nesting are known to be bounded.
llvm::Expected<llvm::json::Value> parseManifest(llvm::StringRef text) {
  if (text.size() > kMaxManifestBytes)
    return llvm::createStringError("larger than " + std::to_string(kMaxManifestBytes) + " bytes");
  if (jsonDepth(text, kMaxManifestDepth) > kMaxManifestDepth)
    return llvm::createStringError("nested deeper than " + std::to_string(kMaxManifestDepth) +
                                   " levels");
  return llvm::json::parse(text);
}

/// Little-endian field of `width` bytes at `offset` of `data`; false if it lies outside.
bool readLE(llvm::StringRef data, uint64_t offset, unsigned width, uint64_t &out) {
  if (offset > data.size() || width > data.size() - offset)
    return false;
  out = 0;
  for (unsigned i = 0; i < width; ++i)
    out |= uint64_t(static_cast<unsigned char>(data[offset + i])) << (8 * i);
  return true;
}

/// Whether the ELF64 little-endian `image` (a cubin) defines a function symbol `name` in its
/// symbol table: how a cubin names its kernels' entry points. The image is untrusted: every
/// offset and count is checked against its size.
bool elfDefinesFunction(llvm::StringRef image, llvm::StringRef name) {
  if (!image.starts_with("\x7f"
                         "ELF") ||
      image.size() < 64 || image[4] != 2 /*ELFCLASS64*/ || image[5] != 1 /*ELFDATA2LSB*/)
    return false;
  uint64_t shoff, shentsize, shnum;
  if (!readLE(image, 0x28, 8, shoff) || !readLE(image, 0x3A, 2, shentsize) ||
      !readLE(image, 0x3C, 2, shnum) || shentsize < 64)
    return false;
  for (uint64_t i = 0; i < shnum; ++i) {
    uint64_t sh = shoff + i * shentsize, type, offset, size, link, entsize;
    if (shoff > image.size() || i * shentsize > image.size() || !readLE(image, sh + 4, 4, type) ||
        !readLE(image, sh + 24, 8, offset) || !readLE(image, sh + 32, 8, size) ||
        !readLE(image, sh + 40, 4, link) || !readLE(image, sh + 56, 8, entsize))
      return false;
    if (type != 2 /*SHT_SYMTAB*/ || entsize < 24 || link >= shnum)
      continue;
    uint64_t strSh = shoff + link * shentsize, strOffset, strSize;
    if (!readLE(image, strSh + 24, 8, strOffset) || !readLE(image, strSh + 32, 8, strSize) ||
        strOffset > image.size() || strSize > image.size() - strOffset)
      return false;
    llvm::StringRef strings = image.substr(strOffset, strSize);
    if (offset > image.size() || size > image.size() - offset)
      return false;
    for (uint64_t sym = offset; sym + 24 <= offset + size; sym += entsize) {
      uint64_t nameOffset, info, shndx;
      if (!readLE(image, sym, 4, nameOffset) || !readLE(image, sym + 4, 1, info) ||
          !readLE(image, sym + 6, 2, shndx))
        return false;
      if ((info & 0xf) != 2 /*STT_FUNC*/ || shndx == 0 || nameOffset >= strings.size())
        continue;
      llvm::StringRef symbol = strings.drop_front(nameOffset);
      if (symbol.substr(0, symbol.find('\0')) == name)
        return true;
    }
  }
  return false;
}

/// The pid a temporary directory's name carries (".tmp-<key>-<pid>-..."), or 0.
pid_t writerOf(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  name.split(parts, '-');
  // ".tmp" and ".trash" split into ["", "tmp"|"trash", key, pid, counter, random].
  unsigned pid = 0;
  if (parts.size() >= 4 && !parts[3].getAsInteger(10, pid))
    return static_cast<pid_t>(pid);
  return 0;
}

bool processAlive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }
} // namespace

std::string tessel::runtime::sha256Hex(const std::string &data) {
  auto digest = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()), data.size()));
  return llvm::toHex(digest, /*LowerCase=*/true);
}

bool KernelCache::isKey(const std::string &key) {
  return key.size() == 64 &&
         llvm::all_of(key, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// Checks the entry `key` of the cache directory `rootfd` against its manifest; returns the
/// problem, or empty when good (then `entry` holds its contents). Nothing is followed: an object
/// under the key's name that is not a directory is a bad entry, and so is a link inside one.
static std::string verifyEntry(int rootfd, const std::string &key, CacheEntry &entry) {
  struct stat st;
  if (::fstatat(rootfd, key.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return "cannot be read (" + std::string(std::strerror(errno)) + ")";
  if (!S_ISDIR(st.st_mode))
    return std::string("not a cache entry (") + kindOf(st.st_mode) + ")";
  Fd dir(openDirectoryAt(rootfd, key));
  if (!dir.ok())
    return "the entry directory cannot be opened (" + std::string(std::strerror(errno)) + ")";
  std::string manifestText;
  if (std::string bad = readRegularFile(dir.get(), kManifest, kMaxManifestBytes, -1, manifestText);
      !bad.empty())
    return std::string(kManifest) + " " + bad;
  llvm::Expected<llvm::json::Value> parsed = parseManifest(manifestText);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    return "manifest.json does not parse (" + message + ")";
  }
  const llvm::json::Object *manifest = parsed->getAsObject();
  if (!manifest)
    return "manifest.json is not a JSON object";
  if (manifest->getInteger("format") != kFormat)
    return "manifest.json has an unknown format";
  std::optional<llvm::StringRef> digest = manifest->getString(kManifestDigest);
  if (!digest || *digest != manifestDigest(*manifest))
    return "manifest.json checksum mismatch";
  std::optional<llvm::StringRef> storedKey = manifest->getString("key");
  if (!storedKey || *storedKey != key)
    return "manifest.json names another key";
  const llvm::json::Object *payload = manifest->getObject("payload");
  if (!payload)
    return "manifest.json has no payload checksums";
  entry.key = key;
  entry.manifest = manifestText;
  for (auto [file, out] :
       {std::pair<const char *, std::string *>{kCubin, &entry.cubin}, {kPtx, &entry.ptx}}) {
    const llvm::json::Object *sums = payload->getObject(file);
    if (!sums)
      return std::string("manifest.json has no checksum of ") + file;
    std::optional<int64_t> size = sums->getInteger("size");
    std::optional<llvm::StringRef> sha = sums->getString("sha256");
    if (!size || !sha || *size < 0)
      return std::string("manifest.json has an incomplete checksum of ") + file;
    if (std::string bad = readRegularFile(dir.get(), file, kMaxPayloadBytes, *size, *out);
        !bad.empty())
      return std::string(file) + " " + bad;
    if (sha256Hex(*out) != *sha)
      return std::string(file) + " checksum mismatch";
  }
  if (entry.cubin.empty())
    return "the cubin is empty";
  // The launch fields name the cubin's entry point: another kernel's cubin, even with its
  // checksums fixed, does not define it.
  if (std::optional<llvm::StringRef> entryPoint = manifest->getString("entry"))
    if (!elfDefinesFunction(entry.cubin, *entryPoint))
      return "the cubin does not define the entry point '" + entryPoint->str() +
             "' the manifest names";
  return {};
}

KernelCache::KernelCache(std::string directory) : root(std::move(directory)) {
  while (root.size() > 1 && root.back() == '/')
    root.pop_back();
}

std::string KernelCache::defaultDirectory() {
  if (const char *dir = std::getenv("TESSEL_CACHE_DIR"); dir && *dir)
    return dir;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return join(xdg, "tessel");
  const char *home = std::getenv("HOME");
  return join(home && *home ? home : "/tmp", ".cache/tessel");
}

std::optional<CacheEntry> KernelCache::lookup(const std::string &key, std::string *problem) {
  if (problem)
    problem->clear();
  if (!isKey(key)) {
    if (problem)
      *problem = "not a cache key: " + key;
    return std::nullopt;
  }
  {
    std::lock_guard<std::mutex> lock(memoryMutex);
    auto it = memory.find(key);
    if (it != memory.end())
      return it->second;
  }
  Fd rootDir(openRoot());
  struct stat st;
  if (!rootDir.ok() || ::fstatat(rootDir.get(), key.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return std::nullopt;
  CacheEntry entry;
  std::string bad = verifyEntry(rootDir.get(), key, entry);
  if (bad.empty())
    return entry;
  if (problem)
    *problem = bad;
  discardEntry(rootDir.get(), key);
  return std::nullopt;
}

int KernelCache::openRoot() const {
  // The cache directory itself is the user's choice and may be reached through a link; nothing
  // below it is.
  return ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/// Creates `dir` and its parents (mode 0755); 0 or the errno of the failing mkdir.
static int makeDirectories(const std::string &dir) {
  if (dir.empty())
    return 0;
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0)
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0)
    if (int err = makeDirectories(dir.substr(0, slash)))
      return err;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return errno;
  return 0;
}

StoreResult KernelCache::store(const std::string &key, const std::string &cubin,
                               const std::string &ptx, const std::string &metadata,
                               std::string &warning) {
  warning.clear();
  llvm::json::Object manifest;
  if (llvm::Expected<llvm::json::Value> meta = parseManifest(metadata)) {
    if (llvm::json::Object *obj = meta->getAsObject())
      manifest = std::move(*obj);
  } else {
    llvm::consumeError(meta.takeError());
  }
  manifest["format"] = kFormat;
  manifest["key"] = key;
  manifest["created"] = static_cast<int64_t>(std::time(nullptr));
  manifest["payload"] = llvm::json::Object{
      {kCubin, llvm::json::Object{{"size", static_cast<int64_t>(cubin.size())},
                                  {"sha256", sha256Hex(cubin)}}},
      {kPtx,
       llvm::json::Object{{"size", static_cast<int64_t>(ptx.size())}, {"sha256", sha256Hex(ptx)}}}};
  manifest[kManifestDigest] = manifestDigest(manifest);
  std::string manifestText;
  {
    llvm::raw_string_ostream os(manifestText);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)));
  }
  CacheEntry entry{key, cubin, ptx, manifestText};

  auto keepInMemory = [&](int err, const std::string &what) {
    {
      std::lock_guard<std::mutex> lock(memoryMutex);
      memory[key] = entry;
    }
    if (!warnedAboutMemory.exchange(true))
      warning = "tessel: cannot write the kernel cache at " + root + " (" + what + ": " +
                std::strerror(err) + "); compiled kernels are kept in memory for this process";
    return StoreResult::InMemory;
  };

  if (!isKey(key))
    return keepInMemory(EINVAL, "not a cache key");
  int err = injectedDirectoryErrno();
  if (!err)
    err = makeDirectories(root);
  if (err)
    return keepInMemory(err, "creating the directory");
  Fd rootDir(openRoot());
  if (!rootDir.ok())
    return keepInMemory(errno, "opening the directory");
  sweepStale(rootDir.get());
  std::string temp = kTempPrefix + key + "-" + uniqueSuffix();
  if (::mkdirat(rootDir.get(), temp.c_str(), 0755) != 0)
    return keepInMemory(errno, "creating a temporary entry");
  bool noSpace = hasFault("enospc-write");
  {
    Fd tempDir(openDirectoryAt(rootDir.get(), temp));
    if (!tempDir.ok()) {
      int oerr = errno;
      removeAt(rootDir.get(), temp);
      return keepInMemory(oerr, "opening a temporary entry");
    }
    for (auto [file, data] : {std::pair<const char *, const std::string *>{kCubin, &cubin},
                              {kPtx, &ptx},
                              {kManifest, &manifestText}}) {
      if (int werr = writeFileAt(tempDir.get(), file, *data, noSpace && data == &cubin)) {
        removeAt(rootDir.get(), temp);
        return keepInMemory(werr, std::string("writing ") + file);
      }
    }
  }
  std::string delay;
  if (hasFault("delay-before-rename", &delay))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay.c_str())));
  if (hasFault("kill-before-rename"))
    std::raise(SIGKILL);

  // rename(2) of a directory onto a non-empty one fails: the first writer wins, atomically.
  // What is in the way may also be a bad entry or a foreign object (a dangling link, a file):
  // it is discarded and the rename tried once more, so nothing can block a key for good.
  for (int attempt = 0;; ++attempt) {
    if (::renameat(rootDir.get(), temp.c_str(), rootDir.get(), key.c_str()) == 0)
      return StoreResult::Written;
    int renameErr = errno;
    if (renameErr != EEXIST && renameErr != ENOTEMPTY && renameErr != ENOTDIR) {
      removeAt(rootDir.get(), temp);
      return keepInMemory(renameErr, "renaming the entry into place");
    }
    CacheEntry theirs;
    if (verifyEntry(rootDir.get(), key, theirs).empty()) {
      removeAt(rootDir.get(), temp);
      return StoreResult::AlreadyPresent;
    }
    if (attempt == 1) {
      // Still bad after one discard: someone keeps putting it back. Ours stays in memory.
      removeAt(rootDir.get(), temp);
      std::lock_guard<std::mutex> lock(memoryMutex);
      memory[key] = entry;
      return StoreResult::InMemory;
    }
    discardEntry(rootDir.get(), key);
  }
}

std::vector<CacheEntryInfo> KernelCache::list() const {
  std::vector<CacheEntryInfo> out;
  Fd rootDir(openRoot());
  if (!rootDir.ok())
    return out;
  std::vector<std::string> names = namesIn(rootDir.get());
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    CacheEntryInfo info;
    info.key = name;
    info.path = join(root, name);
    struct stat st;
    if (::fstatat(rootDir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue; // removed meanwhile
    info.created = static_cast<int64_t>(st.st_mtime);
    info.bytes = treeBytes(rootDir.get(), name);
    llvm::StringRef ref(name);
    if (S_ISDIR(st.st_mode) && (ref.starts_with(kTempPrefix) || ref.starts_with(kTrashPrefix))) {
      info.temporary = true;
      pid_t writer = writerOf(ref);
      bool old = std::time(nullptr) - st.st_mtime > kStaleSeconds;
      info.problem = processAlive(writer) && ref.starts_with(kTempPrefix) && !old
                         ? ""
                         : "stale temporary directory of a writer that died";
      out.push_back(std::move(info));
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      info.problem = std::string("not a cache entry (") + kindOf(st.st_mode) + ")";
      out.push_back(std::move(info));
      continue;
    }
    if (!isKey(name)) {
      info.problem = "not a cache entry";
      out.push_back(std::move(info));
      continue;
    }
    CacheEntry entry;
    info.problem = verifyEntry(rootDir.get(), name, entry);
    std::string manifestText = entry.manifest;
    Fd dir(openDirectoryAt(rootDir.get(), name));
    if (manifestText.empty() && dir.ok())
      readRegularFile(dir.get(), kManifest, kMaxManifestBytes, -1, manifestText);
    if (!manifestText.empty()) {
      if (llvm::Expected<llvm::json::Value> v = parseManifest(manifestText)) {
        if (const llvm::json::Object *m = v->getAsObject()) {
          info.manifest = manifestText;
          if (auto k = m->getString("kernel"))
            info.kernel = k->str();
          if (auto c = m->getString("chip"))
            info.chip = c->str();
          if (auto t = m->getInteger("created"))
            info.created = *t;
        }
      } else {
        llvm::consumeError(v.takeError());
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

bool KernelCache::remove(const std::string &name, std::string &error) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    error = "not an entry name: " + name;
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(memoryMutex);
    memory.erase(name);
  }
  Fd rootDir(openRoot());
  struct stat st;
  if (!rootDir.ok() || ::fstatat(rootDir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    error = "no entry " + name;
    return false;
  }
  // A directory is renamed aside first; anything else (a link: the link, not its target) is
  // unlinked where it is.
  int err = injectedRemoveErrno();
  if (!err)
    err = S_ISDIR(st.st_mode) ? discardEntry(rootDir.get(), name) : removeAt(rootDir.get(), name);
  if (!err && ::fstatat(rootDir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    err = EBUSY;
  if (err) {
    error = "cannot remove " + join(root, name) + ": " + std::strerror(err);
    return false;
  }
  return true;
}

unsigned KernelCache::clear() {
  unsigned removed = 0;
  std::string error;
  for (const CacheEntryInfo &info : list())
    removed += remove(info.key, error) ? 1 : 0;
  std::lock_guard<std::mutex> lock(memoryMutex);
  memory.clear();
  return removed;
}
