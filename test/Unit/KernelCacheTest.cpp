//===- KernelCacheTest.cpp - the on-disk kernel cache ---------------------===//
//
// KernelCache without Python: a stored entry reads back whole; a corrupted one is discarded and
// reported, never returned; threads racing to store one key leave one good entry; an injected
// read-only directory keeps entries in memory and warns once per process.
//
//===----------------------------------------------------------------------===//

#include "tessel/Runtime/KernelCache.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using tessel::runtime::KernelCache;
using tessel::runtime::StoreResult;

namespace {
std::string freshDirectory() {
  char tmpl[] = "/tmp/tessel-cache-test-XXXXXX";
  return mkdtemp(tmpl);
}

std::vector<std::string> names(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

/// Removes a test's cache directory (entries first).
void removeDirectory(const std::string &dir) {
  KernelCache(dir).clear();
  rmdir(dir.c_str());
}

const std::string kKey(64, 'a');
const std::string kCubin = std::string("\x7f"
                                       "ELF",
                                       4) +
                           std::string(1000, '\x01');
} // namespace

TEST(KernelCache, StoresAndReadsBack) {
  KernelCache cache(freshDirectory());
  std::string warning;
  EXPECT_EQ(cache.store(kKey, kCubin, ".version 8.0", R"({"kernel":"k","chip":"sm_80"})", warning),
            StoreResult::Written);
  EXPECT_TRUE(warning.empty());
  KernelCache reader(cache.directory());
  std::string problem;
  auto entry = reader.lookup(kKey, &problem);
  ASSERT_TRUE(entry.has_value()) << problem;
  EXPECT_EQ(entry->cubin, kCubin);
  EXPECT_EQ(entry->ptx, ".version 8.0");
  EXPECT_NE(entry->manifest.find("\"kernel\": \"k\""), std::string::npos);
  auto listed = reader.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].kernel, "k");
  EXPECT_EQ(listed[0].chip, "sm_80");
  EXPECT_TRUE(listed[0].problem.empty());
  removeDirectory(cache.directory());
}

TEST(KernelCache, CorruptedEntryIsDiscardedNotReturned) {
  KernelCache cache(freshDirectory());
  std::string warning, problem;
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  {
    std::fstream f(cache.directory() + "/" + kKey + "/kernel.cubin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x55');
  }
  KernelCache reader(cache.directory());
  EXPECT_FALSE(reader.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "kernel.cubin checksum mismatch");
  EXPECT_TRUE(names(cache.directory()).empty());
  removeDirectory(cache.directory());
}

TEST(KernelCache, RacingWritersLeaveOneGoodEntry) {
  std::string dir = freshDirectory();
  std::vector<std::thread> threads;
  std::vector<StoreResult> results(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      KernelCache cache(dir);
      std::string warning;
      results[i] = cache.store(kKey, kCubin, "ptx", "{}", warning);
    });
  for (std::thread &t : threads)
    t.join();
  int written = 0;
  for (StoreResult r : results) {
    EXPECT_NE(r, StoreResult::InMemory);
    written += r == StoreResult::Written;
  }
  EXPECT_EQ(written, 1);
  EXPECT_EQ(names(dir), std::vector<std::string>{kKey});
  EXPECT_TRUE(KernelCache(dir).lookup(kKey).has_value());
  removeDirectory(dir);
}

TEST(KernelCache, UnwritableDirectoryKeepsEntriesInMemory) {
  std::string dir = freshDirectory();
  setenv("TESSEL_CACHE_FAULT", "erofs", 1);
  KernelCache cache(dir);
  std::string first, second;
  EXPECT_EQ(cache.store(kKey, kCubin, "ptx", "{}", first), StoreResult::InMemory);
  EXPECT_EQ(cache.store(std::string(64, 'b'), kCubin, "ptx", "{}", second), StoreResult::InMemory);
  unsetenv("TESSEL_CACHE_FAULT");
  EXPECT_NE(first.find("Read-only file system"), std::string::npos);
  EXPECT_TRUE(second.empty()); // once per process
  EXPECT_TRUE(cache.lookup(kKey).has_value());
  EXPECT_TRUE(names(dir).empty());
  removeDirectory(dir);
}

// --- a shared or hostile cache directory (issue 15) ----------------------------------------

namespace {
/// A directory outside the cache with one file in it: what a planted link points to.
std::string victimDirectory() {
  std::string dir = freshDirectory();
  std::ofstream(dir + "/precious") << "do not delete";
  return dir;
}

bool exists(const std::string &path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}
} // namespace

TEST(KernelCache, SymlinkEntryIsMovedAsideNotFollowed) {
  // A link named like a key, pointing at someone else's directory: the lookup must neither read
  // nor delete what it points to, only remove the link.
  std::string dir = freshDirectory(), victim = victimDirectory();
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/" + kKey).c_str()), 0);
  KernelCache cache(dir);
  std::string problem;
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "not a cache entry (a symbolic link)");
  EXPECT_TRUE(exists(victim + "/precious"));
  EXPECT_TRUE(names(dir).empty());
  // list and clear do not follow one either.
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/" + kKey).c_str()), 0);
  auto listed = cache.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, "not a cache entry (a symbolic link)");
  EXPECT_EQ(cache.clear(), 1u);
  EXPECT_TRUE(exists(victim + "/precious"));
  EXPECT_TRUE(names(dir).empty());
  removeDirectory(dir);
  unlink((victim + "/precious").c_str());
  rmdir(victim.c_str());
}

TEST(KernelCache, SymlinkInsideAnEntryIsNotFollowed) {
  // kernel.cubin replaced by a link to a file elsewhere: a bad entry, and the file survives.
  std::string dir = freshDirectory(), victim = victimDirectory();
  KernelCache cache(dir);
  std::string warning, problem;
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  std::string cubin = dir + "/" + kKey + "/kernel.cubin";
  unlink(cubin.c_str());
  ASSERT_EQ(symlink((victim + "/precious").c_str(), cubin.c_str()), 0);
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_NE(problem.find("kernel.cubin"), std::string::npos) << problem;
  EXPECT_TRUE(exists(victim + "/precious"));
  EXPECT_TRUE(names(dir).empty());
  removeDirectory(dir);
  unlink((victim + "/precious").c_str());
  rmdir(victim.c_str());
}

TEST(KernelCache, ForeignObjectUnderAKeyIsMovedAside) {
  // A FIFO named like a key is not opened (that would block), only moved aside; so is a file.
  std::string dir = freshDirectory();
  ASSERT_EQ(mkfifo((dir + "/" + kKey).c_str(), 0644), 0);
  std::ofstream(dir + "/" + std::string(64, 'c')) << "junk";
  KernelCache cache(dir);
  std::string problem;
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "not a cache entry (a FIFO)");
  EXPECT_FALSE(cache.lookup(std::string(64, 'c'), &problem).has_value());
  EXPECT_EQ(problem, "not a cache entry (a plain file)");
  EXPECT_TRUE(names(dir).empty());
  removeDirectory(dir);
}

TEST(KernelCache, EditedManifestIsABadEntry) {
  // The launch fields are under the manifest's digest: an edited one is not a hit.
  std::string dir = freshDirectory();
  KernelCache cache(dir);
  std::string warning, problem;
  cache.store(kKey, kCubin, "ptx", R"({"kernel":"k","dynamic_shared_bytes":0})", warning);
  std::string path = dir + "/" + kKey + "/manifest.json";
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  size_t at = text.find("\"dynamic_shared_bytes\": 0");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 25, "\"dynamic_shared_bytes\": 99999");
  std::ofstream(path, std::ios::trunc) << text;
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "manifest.json checksum mismatch");
  removeDirectory(dir);
}

TEST(KernelCache, CubinMustDefineTheManifestsEntryPoint) {
  // A consistent entry (every checksum right) whose cubin is not an ELF image defining the
  // entry the manifest names is refused.
  std::string dir = freshDirectory();
  KernelCache cache(dir);
  std::string warning, problem;
  cache.store(kKey, kCubin, "ptx", R"({"kernel":"k","entry":"k"})", warning);
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "the cubin does not define the entry point 'k' the manifest names");
  removeDirectory(dir);
}

TEST(KernelCache, DeeplyNestedManifestIsRefusedBeforeParsing) {
  // `[` x 50,000 overflowed the stack of the recursive JSON parser in every later load, list,
  // verify and clear; the nesting and size are bounded before parsing.
  std::string dir = freshDirectory();
  KernelCache cache(dir);
  std::string warning, problem;
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  std::ofstream(dir + "/" + kKey + "/manifest.json", std::ios::trunc) << std::string(50000, '[');
  auto listed = cache.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, "manifest.json does not parse (nested deeper than 64 levels)");
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_EQ(problem, "manifest.json does not parse (nested deeper than 64 levels)");
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  std::ofstream(dir + "/" + kKey + "/manifest.json", std::ios::trunc)
      << "{\"a\":\"" << std::string(2 << 20, 'x') << "\"}";
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_NE(problem.find("larger than 1048576 bytes"), std::string::npos) << problem;
  removeDirectory(dir);
}

TEST(KernelCache, FifosAndHugeFilesAreRefusedWithoutReading) {
  // A FIFO in place of kernel.cubin or manifest.json blocked load, verify and list forever; a
  // 10 GB sparse cubin was read whole before its size was compared. fstat decides first.
  std::string dir = freshDirectory();
  KernelCache cache(dir);
  std::string warning, problem;
  for (const char *file : {"kernel.cubin", "manifest.json"}) {
    cache.store(kKey, kCubin, "ptx", "{}", warning);
    std::string path = dir + "/" + kKey + "/" + file;
    unlink(path.c_str());
    ASSERT_EQ(mkfifo(path.c_str(), 0644), 0);
    auto listed = cache.list();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].problem, std::string(file) + " is a FIFO, not a file");
    EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
    EXPECT_EQ(problem, std::string(file) + " is a FIFO, not a file");
    EXPECT_TRUE(names(dir).empty());
  }
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  std::string cubin = dir + "/" + kKey + "/kernel.cubin";
  ASSERT_EQ(truncate(cubin.c_str(), int64_t(10) << 30), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(cache.lookup(kKey, &problem).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(problem, "kernel.cubin is larger than 268435456 bytes (10737418240)");
  removeDirectory(dir);
}

TEST(KernelCache, OldTemporariesOfDeadWritersAreSwept) {
  // A writer killed between its write and the rename leaves a .tmp- directory; nothing cleaned
  // it. A store removes those more than an hour old and leaves recent ones (a live writer's).
  std::string dir = freshDirectory();
  std::string old = dir + "/.tmp-" + kKey + "-999999-0-dead";
  std::string recent = dir + "/.tmp-" + kKey + "-999998-0-busy";
  for (const std::string &d : {old, recent}) {
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
    std::ofstream(d + "/kernel.cubin") << "half";
  }
  struct timespec times[2] = {{time(nullptr) - 7200, 0}, {time(nullptr) - 7200, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, old.c_str(), times, 0), 0);
  KernelCache cache(dir);
  std::string warning;
  EXPECT_EQ(cache.store(std::string(64, 'b'), kCubin, "ptx", "{}", warning), StoreResult::Written);
  EXPECT_FALSE(exists(old));
  EXPECT_TRUE(exists(recent));
  removeDirectory(dir);
}

TEST(KernelCache, DanglingSymlinkKeyDoesNotBlockTheKey) {
  // A dangling link named like a key made every store fail (rename onto a non-directory) and
  // kept that kernel out of the disk cache for good.
  std::string dir = freshDirectory();
  ASSERT_EQ(symlink("/nonexistent/tessel", (dir + "/" + kKey).c_str()), 0);
  KernelCache cache(dir);
  std::string warning;
  EXPECT_EQ(cache.store(kKey, kCubin, "ptx", "{}", warning), StoreResult::Written);
  EXPECT_TRUE(warning.empty());
  EXPECT_TRUE(KernelCache(dir).lookup(kKey).has_value());
  removeDirectory(dir);
}

TEST(KernelCache, RemoveReportsAReadOnlyDirectory) {
  std::string dir = freshDirectory();
  KernelCache cache(dir);
  std::string warning, error;
  cache.store(kKey, kCubin, "ptx", "{}", warning);
  setenv("TESSEL_CACHE_FAULT", "erofs", 1);
  EXPECT_FALSE(cache.remove(kKey, error));
  unsetenv("TESSEL_CACHE_FAULT");
  EXPECT_NE(error.find("Read-only file system"), std::string::npos) << error;
  EXPECT_EQ(names(dir), std::vector<std::string>{kKey});
  removeDirectory(dir);
}
