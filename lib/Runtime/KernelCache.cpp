//===- KernelCache.cpp - the on-disk cache of compiled kernels ------------===//
//
// Plain POSIX calls (mkdir, open/write/fsync, rename) so that every failure keeps its errno: the
// fallback to memory depends on it, and so does the test hook `TESSEL_CACHE_FAULT`, which makes
// the write path fail the way a full or read-only disk would, or kills the process between the
// temporary write and the rename (docs/dev/cache.md lists its values).
//
//===----------------------------------------------------------------------===//

#include "tessel/Runtime/KernelCache.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/SHA256.h"

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
constexpr int kFormat = 1;
/// Names of temporary directories (being written) and of entries being deleted.
constexpr const char *kTempPrefix = ".tmp-";
constexpr const char *kTrashPrefix = ".trash-";

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

bool readFile(const std::string &path, std::string &out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  out.clear();
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ::close(fd);
      return false;
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

/// Writes `data` to a new file and fsyncs it; returns 0 or the errno of the failing call.
int writeFile(const std::string &path, const std::string &data, bool failWithNoSpace) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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

/// Removes a directory and the plain files in it (entries hold no subdirectories).
void removeTree(const std::string &path) {
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..")
        continue;
      ::unlink(join(path, name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

std::string uniqueSuffix() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         llvm::utohexstr((uint64_t(rd()) << 32) | rd(), /*LowerCase=*/true);
}

/// Moves an entry aside and deletes it, so no reader ever sees it half deleted.
void discardEntry(const std::string &root, const std::string &name) {
  std::string trash = join(root, kTrashPrefix + name + "-" + uniqueSuffix());
  if (::rename(join(root, name).c_str(), trash.c_str()) == 0)
    removeTree(trash);
}

uint64_t treeBytes(const std::string &path) {
  uint64_t total = 0;
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *e = ::readdir(d)) {
      struct stat st;
      if (e->d_name[0] != '.' && ::stat(join(path, e->d_name).c_str(), &st) == 0)
        total += static_cast<uint64_t>(st.st_size);
    }
    ::closedir(d);
  }
  return total;
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
  return key.size() == 64 && llvm::all_of(key, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string tessel::runtime::verifyEntryDirectory(const std::string &path, const std::string &key,
                                                  CacheEntry &entry) {
  std::string manifestText;
  if (!readFile(join(path, kManifest), manifestText))
    return "no readable manifest.json";
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(manifestText);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    return "manifest.json does not parse (" + message + ")";
  }
  const llvm::json::Object *manifest = parsed->getAsObject();
  if (!manifest)
    return "manifest.json is not a JSON object";
  if (manifest->getInteger("format") != kFormat)
    return "manifest.json has an unknown format";
  std::optional<llvm::StringRef> storedKey = manifest->getString("key");
  if (!storedKey || *storedKey != key)
    return "manifest.json names another key";
  const llvm::json::Object *payload = manifest->getObject("payload");
  if (!payload)
    return "manifest.json has no payload checksums";
  entry.key = key;
  entry.manifest = manifestText;
  for (auto [file, out] : {std::pair<const char *, std::string *>{kCubin, &entry.cubin},
                           {kPtx, &entry.ptx}}) {
    const llvm::json::Object *sums = payload->getObject(file);
    if (!sums)
      return std::string("manifest.json has no checksum of ") + file;
    std::optional<int64_t> size = sums->getInteger("size");
    std::optional<llvm::StringRef> sha = sums->getString("sha256");
    if (!size || !sha)
      return std::string("manifest.json has an incomplete checksum of ") + file;
    if (!readFile(join(path, file), *out))
      return std::string(file) + " is missing";
    if (static_cast<int64_t>(out->size()) != *size)
      return std::string(file) + " has " + std::to_string(out->size()) + " bytes, the manifest says " +
             std::to_string(*size);
    if (sha256Hex(*out) != *sha)
      return std::string(file) + " checksum mismatch";
  }
  if (entry.cubin.empty())
    return "the cubin is empty";
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
  std::string path = join(root, key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return std::nullopt;
  CacheEntry entry;
  std::string bad = verifyEntryDirectory(path, key, entry);
  if (bad.empty())
    return entry;
  if (problem)
    *problem = bad;
  discardEntry(root, key);
  return std::nullopt;
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
  if (llvm::Expected<llvm::json::Value> meta = llvm::json::parse(metadata)) {
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
      {kPtx, llvm::json::Object{{"size", static_cast<int64_t>(ptx.size())},
                                {"sha256", sha256Hex(ptx)}}}};
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
  std::string temp = join(root, kTempPrefix + key + "-" + uniqueSuffix());
  if (::mkdir(temp.c_str(), 0755) != 0)
    return keepInMemory(errno, "creating a temporary entry");
  bool noSpace = hasFault("enospc-write");
  for (auto [file, data] : {std::pair<const char *, const std::string *>{kCubin, &cubin},
                           {kPtx, &ptx},
                           {kManifest, &manifestText}}) {
    if (int werr = writeFile(join(temp, file), *data, noSpace && data == &cubin)) {
      removeTree(temp);
      return keepInMemory(werr, std::string("writing ") + file);
    }
  }
  std::string delay;
  if (hasFault("delay-before-rename", &delay))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay.c_str())));
  if (hasFault("kill-before-rename"))
    std::raise(SIGKILL);

  std::string final = join(root, key);
  // rename(2) of a directory onto a non-empty one fails: the first writer wins, atomically.
  if (::rename(temp.c_str(), final.c_str()) == 0)
    return StoreResult::Written;
  int renameErr = errno;
  removeTree(temp);
  if (renameErr == EEXIST || renameErr == ENOTEMPTY) {
    CacheEntry theirs;
    if (verifyEntryDirectory(final, key, theirs).empty())
      return StoreResult::AlreadyPresent;
    // What is there is bad (a corrupted entry another process has not yet discarded): keep ours
    // in memory; the next lookup in a fresh process discards theirs and rebuilds.
    std::lock_guard<std::mutex> lock(memoryMutex);
    memory[key] = entry;
    return StoreResult::InMemory;
  }
  return keepInMemory(renameErr, "renaming the entry into place");
}

std::vector<CacheEntryInfo> KernelCache::list() const {
  std::vector<CacheEntryInfo> out;
  DIR *d = ::opendir(root.c_str());
  if (!d)
    return out;
  std::vector<std::string> names;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..")
      names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string &name : names) {
    CacheEntryInfo info;
    info.key = name;
    info.path = join(root, name);
    struct stat st;
    if (::stat(info.path.c_str(), &st) != 0)
      continue; // removed meanwhile
    info.created = static_cast<int64_t>(st.st_mtime);
    info.bytes = S_ISDIR(st.st_mode) ? treeBytes(info.path) : static_cast<uint64_t>(st.st_size);
    llvm::StringRef ref(name);
    if (ref.starts_with(kTempPrefix) || ref.starts_with(kTrashPrefix)) {
      info.temporary = true;
      pid_t writer = writerOf(ref);
      info.problem = processAlive(writer) && ref.starts_with(kTempPrefix)
                         ? ""
                         : "stale temporary directory of a writer that died";
      out.push_back(std::move(info));
      continue;
    }
    if (!S_ISDIR(st.st_mode) || !isKey(name)) {
      info.problem = "not a cache entry";
      out.push_back(std::move(info));
      continue;
    }
    CacheEntry entry;
    info.problem = verifyEntryDirectory(info.path, name, entry);
    std::string manifestText;
    if (readFile(join(info.path, kManifest), manifestText)) {
      if (llvm::Expected<llvm::json::Value> v = llvm::json::parse(manifestText)) {
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
  struct stat st;
  std::string path = join(root, name);
  if (::stat(path.c_str(), &st) != 0) {
    error = "no entry " + name;
    return false;
  }
  if (S_ISDIR(st.st_mode))
    discardEntry(root, name);
  else
    ::unlink(path.c_str());
  if (::stat(path.c_str(), &st) == 0) {
    error = "cannot remove " + path + ": " + std::strerror(errno ? errno : EACCES);
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
