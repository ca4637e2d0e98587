// TimingDb: SQLite storage of measurements, scoped by device fingerprint and library version.
#include "xalloc/profiler/timing_db.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "xalloc/error.h"

namespace xalloc::profiler {

std::string TimingDb::defaultPath() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/xalloc/timings.sqlite";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/xalloc/timings.sqlite";
}

TimingDb::TimingDb(const std::string& path, std::string device, std::string library)
    : path_(path), device_(std::move(device)), library_(std::move(library)) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty())
    std::filesystem::create_directories(parent, ec);
  if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError(path, "cannot open the timing database: " + why + " (--no-db skips it)");
  }
  sqlite3_busy_timeout(db_, 5000); // another xprof may be writing
  try {
    exec("CREATE TABLE IF NOT EXISTS timings ("
         " device TEXT NOT NULL, library TEXT NOT NULL, key TEXT NOT NULL,"
         " median_ms REAL NOT NULL, iqr_ms REAL NOT NULL, aux REAL NOT NULL,"
         " samples TEXT NOT NULL, created INTEGER NOT NULL,"
         " PRIMARY KEY (device, library, key))");
    exec("CREATE TABLE IF NOT EXISTS documents ("
         " device TEXT NOT NULL, library TEXT NOT NULL, key TEXT NOT NULL,"
         " body TEXT NOT NULL, created INTEGER NOT NULL,"
         " PRIMARY KEY (device, library, key))");
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
  if (sqlite3_prepare_v2(db_,
                         "SELECT median_ms, iqr_ms, aux, samples FROM timings"
                         " WHERE device = ?1 AND library = ?2 AND key = ?3",
                         -1, &get_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO timings"
                         " (device, library, key, median_ms, iqr_ms, aux, samples, created)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                         -1, &put_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_,
                         "SELECT body FROM documents"
                         " WHERE device = ?1 AND library = ?2 AND key = ?3",
                         -1, &get_doc_, nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO documents (device, library, key, body, created)"
                         " VALUES (?1, ?2, ?3, ?4, ?5)",
                         -1, &put_doc_, nullptr) != SQLITE_OK) {
    std::string why = sqlite3_errmsg(db_);
    sqlite3_finalize(get_);
    sqlite3_finalize(put_);
    sqlite3_finalize(get_doc_);
    sqlite3_close(db_);
    db_ = nullptr;
    throw InputError(path, "not a usable timing database: " + why + " (--no-db skips it)");
  }
}

TimingDb::~TimingDb() {
  try {
    commit();
  } catch (...) {
    // A failed final commit loses cached timings, never results.
  }
  sqlite3_finalize(get_);
  sqlite3_finalize(put_);
  sqlite3_finalize(get_doc_);
  sqlite3_finalize(put_doc_);
  sqlite3_close(db_);
}

void TimingDb::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw InputError(path_, "timing database: " + why + " (--no-db skips it)");
  }
}

void TimingDb::begin() {
  if (!in_transaction_) {
    exec("BEGIN IMMEDIATE");
    in_transaction_ = true;
  }
}

void TimingDb::commit() {
  if (in_transaction_) {
    in_transaction_ = false;
    exec("COMMIT");
  }
}

std::optional<StoredTiming> TimingDb::get(const std::string& key) {
  sqlite3_reset(get_);
  sqlite3_bind_text(get_, 1, device_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(get_, 2, library_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(get_, 3, key.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(get_) != SQLITE_ROW) {
    ++misses_;
    return std::nullopt;
  }
  StoredTiming t;
  t.stats.median_ms = sqlite3_column_double(get_, 0);
  t.stats.iqr_ms = sqlite3_column_double(get_, 1);
  t.aux = sqlite3_column_double(get_, 2);
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(get_, 3));
  try {
    t.stats.samples_ms = nlohmann::json::parse(text ? text : "[]").get<std::vector<double>>();
  } catch (const std::exception&) {
    ++misses_; // a damaged row: measure again (and overwrite it)
    return std::nullopt;
  }
  ++hits_;
  return t;
}

std::optional<std::vector<StoredTiming>> TimingDb::getAll(const std::vector<std::string>& keys) {
  std::vector<StoredTiming> out;
  for (const auto& key : keys) {
    auto hit = get(key);
    if (!hit)
      return std::nullopt;
    out.push_back(std::move(*hit));
  }
  return out;
}

void TimingDb::put(const std::string& key, const StoredTiming& value) {
  begin();
  const std::string samples = nlohmann::json(value.stats.samples_ms).dump();
  sqlite3_reset(put_);
  sqlite3_bind_text(put_, 1, device_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(put_, 2, library_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(put_, 3, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(put_, 4, value.stats.median_ms);
  sqlite3_bind_double(put_, 5, value.stats.iqr_ms);
  sqlite3_bind_double(put_, 6, value.aux);
  sqlite3_bind_text(put_, 7, samples.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(put_, 8, static_cast<sqlite3_int64>(std::time(nullptr)));
  if (sqlite3_step(put_) != SQLITE_DONE)
    throw InputError(path_, std::string("timing database: cannot store a measurement: ") +
                                sqlite3_errmsg(db_) + " (--no-db skips it)");
}

std::optional<std::string> TimingDb::getDocument(const std::string& key) {
  sqlite3_reset(get_doc_);
  sqlite3_bind_text(get_doc_, 1, device_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(get_doc_, 2, library_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(get_doc_, 3, key.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(get_doc_) != SQLITE_ROW)
    return std::nullopt;
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(get_doc_, 0));
  return std::string(text ? text : "");
}

void TimingDb::putDocument(const std::string& key, const std::string& body) {
  begin();
  sqlite3_reset(put_doc_);
  sqlite3_bind_text(put_doc_, 1, device_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(put_doc_, 2, library_.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(put_doc_, 3, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(put_doc_, 4, body.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(put_doc_, 5, static_cast<sqlite3_int64>(std::time(nullptr)));
  if (sqlite3_step(put_doc_) != SQLITE_DONE)
    throw InputError(path_, std::string("timing database: cannot store a profile: ") +
                                sqlite3_errmsg(db_) + " (--no-db skips it)");
}

} // namespace xalloc::profiler
