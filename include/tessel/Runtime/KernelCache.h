//===- KernelCache.h - the on-disk cache of compiled kernels ----*- C++ -*-===//
//
// A directory of entries, one per cache key: `<dir>/<key>/` holds `kernel.cubin`, `kernel.ptx`
// and `manifest.json` (the caller's metadata — kernel name, argument signature, launch needs, the
// ingredients of the key — plus the size and SHA-256 of each payload file). An entry is written
// whole into a temporary directory beside it and renamed into place, so a reader sees a complete
// entry or none; of several writers of one key the first rename wins and the others discard
// theirs. Every load checks the manifest's own digest, the payload checksums and that the cubin
// defines the entry point the manifest names: a bad entry is deleted and reported as a miss,
// never returned. No symbolic link below the cache directory is ever followed, and nothing
// outside it is ever deleted. When the directory cannot be written (read-only, no space, no
// permission) entries are kept in memory and the process is warned once.
//
// The cache knows nothing about MLIR: keys are computed by the caller (python/tessel/cache.py).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_KERNELCACHE_H
#define TESSEL_RUNTIME_KERNELCACHE_H

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessel::runtime {

/// One cache entry: the payload and the manifest as stored (JSON text).
struct CacheEntry {
  std::string key;
  std::string cubin;
  std::string ptx;
  std::string manifest;
};

/// What `list` says about one entry (or one leftover temporary directory).
struct CacheEntryInfo {
  std::string key;
  std::string path;
  /// From the manifest; empty when it cannot be read.
  std::string kernel;
  std::string chip;
  std::string manifest;
  /// Bytes on disk (all files of the entry).
  uint64_t bytes = 0;
  /// Seconds since the epoch when the entry was written (manifest, else the directory's mtime).
  int64_t created = 0;
  /// Empty for a good entry; otherwise why it is bad ("cubin checksum mismatch", "stale
  /// temporary directory of a writer that died", ...).
  std::string problem;
  bool temporary = false;
};

enum class StoreResult {
  /// This call's entry was renamed into place.
  Written,
  /// Another writer's good entry was already in place; this one was discarded.
  AlreadyPresent,
  /// The directory could not be written: the entry lives in this process's memory only.
  InMemory,
};

class KernelCache {
public:
  explicit KernelCache(std::string directory);

  /// `$TESSEL_CACHE_DIR`, else `$XDG_CACHE_HOME/tessel`, else `~/.cache/tessel`.
  static std::string defaultDirectory();

  const std::string &directory() const { return root; }

  /// The entry for `key`: memory first, then disk. A disk entry that fails verification is
  /// removed (renamed aside, then deleted) and `problem` says why; the result is then empty.
  std::optional<CacheEntry> lookup(const std::string &key, std::string *problem = nullptr);

  /// Stores an entry (first removing temporary directories more than an hour old: left by
  /// writers that died). `metadata` is a JSON object; the cache adds `key`, `format`, `created`,
  /// `payload` (size and SHA-256 of each file) and `manifest_sha256` (the digest of all the
  /// rest) and writes it as manifest.json. Where `metadata` names an `entry`, a load checks that
  /// the cubin defines that function. `warning` is set
  /// (once per process) when the entry could only be kept in memory.
  StoreResult store(const std::string &key, const std::string &cubin, const std::string &ptx,
                    const std::string &metadata, std::string &warning);

  /// Every entry and leftover temporary directory, each verified.
  std::vector<CacheEntryInfo> list() const;

  /// Removes one entry (or leftover temporary directory) by key or name; false with `error`.
  bool remove(const std::string &name, std::string &error);

  /// Removes every entry and temporary directory; returns how many were removed.
  unsigned clear();

  /// Whether `key` looks like a key (64 lowercase hex digits).
  static bool isKey(const std::string &key);

private:
  /// A descriptor of the cache directory (the one path the cache follows), or -1 with errno.
  int openRoot() const;

  std::string root;
  std::mutex memoryMutex;
  std::map<std::string, CacheEntry> memory;
};

/// Lowercase hex SHA-256 of `data`.
std::string sha256Hex(const std::string &data);

} // namespace tessel::runtime

#endif // TESSEL_RUNTIME_KERNELCACHE_H
