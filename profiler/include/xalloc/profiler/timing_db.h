// The timing database: measurements xprof has already taken, kept in SQLite and reused. Every
// entry is scoped to a device fingerprint and a library version, so a measurement from another
// machine, another thread count or another libtorch is never used. Keys name what was measured
// (an op with its argument layouts, a conversion of a layout, a consumer with one input swapped);
// a finished profile is kept too, keyed by the model's bytes and every setting that shapes it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "xalloc/profiler/measure.h"

struct sqlite3;
struct sqlite3_stmt;

namespace xalloc::profiler {

class TimingDb final : public TimingStore {
public:
  /// Opens (creating the file and its folder if needed) the database at `path`. Throws
  /// InputError when it cannot. `device` and `library` scope every read and write.
  TimingDb(const std::string& path, std::string device, std::string library);
  ~TimingDb() override;
  TimingDb(const TimingDb&) = delete;
  TimingDb& operator=(const TimingDb&) = delete;

  std::optional<StoredTiming> get(const std::string& key) override;
  /// Reading stops at the first miss.
  std::optional<std::vector<StoredTiming>> getAll(const std::vector<std::string>& keys) override;
  void put(const std::string& key, const StoredTiming& value) override;
  /// Whole documents (a finished profile), scoped like the measurements; not counted in
  /// hits() and misses(), which count measurements.
  std::optional<std::string> getDocument(const std::string& key);
  void putDocument(const std::string& key, const std::string& body);
  /// Writes what was put so far (puts are batched in one transaction).
  void commit();

  std::int64_t hits() const { return hits_; }
  std::int64_t misses() const { return misses_; }
  const std::string& path() const { return path_; }

  /// ~/.cache/xalloc/timings.sqlite (or $XDG_CACHE_HOME/xalloc/timings.sqlite).
  static std::string defaultPath();

private:
  void exec(const char* sql);
  void begin();
  std::string path_, device_, library_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* get_ = nullptr;
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* get_doc_ = nullptr;
  sqlite3_stmt* put_doc_ = nullptr;
  bool in_transaction_ = false;
  std::int64_t hits_ = 0, misses_ = 0;
};

} // namespace xalloc::profiler
