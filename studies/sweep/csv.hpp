// CSV as sweeps write and read it (RFC 4180): fields separated by ',', records ended by '\n', a
// field quoted with '"' when it holds ',', '"' or a line break (a quote inside is doubled).
//
// Sweep files are appended to while a sweep runs, so a reader must cope with a file whose last
// record was cut short by a crash: read_csv() returns the complete records and says how many
// bytes they span; what follows (a torn record) is reported, never returned as a row.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipetwin::sim {

using CsvRow = std::vector<std::string>;

// One field, quoted when needed.
std::string csv_field(std::string_view text);
// A record: the fields joined by ',' and ended by '\n'.
std::string csv_line(const CsvRow& fields);

struct CsvText {
  CsvRow header;
  std::vector<CsvRow> rows;     // complete records after the header
  size_t header_end = 0;        // byte offset just past the header's '\n' (0: no header)
  std::vector<size_t> row_end;  // byte offset just past each row's '\n'
  size_t complete_bytes = 0;    // bytes spanned by the header and the complete rows
  bool torn_tail = false;       // bytes after the last complete record (a cut-short record)
};

// Splits `text` into records. A record is complete once its '\n' (outside quotes) is read.
// Throws InputError naming `origin` and the line for a quote in the middle of an unquoted field.
CsvText parse_csv(std::string_view text, const std::string& origin);
// Reads and parses a file; a missing or unreadable file is an InputError naming it.
CsvText read_csv(const std::string& path);

// Index of `name` in `header`; InputError naming `origin` when absent.
size_t csv_column(const CsvRow& header, std::string_view name, const std::string& origin);

}  // namespace pipetwin::sim
