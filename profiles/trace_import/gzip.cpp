#include "profiles/trace_import/gzip.hpp"

#include <zlib.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::trace_import {

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view bytes, const std::string& origin) {
  auto fail = [&](const std::string& why) {
    return InputError(fmt::format("{}: not a valid gzip file ({})", origin, why));
  };
  z_stream z{};
  // 16 + MAX_WBITS: a gzip header and trailer around the deflate stream (zlib.h, inflateInit2).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw fail("zlib could not start");
  std::string out;
  char chunk[1 << 16];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  int rc = Z_OK;
  while (true) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - z.avail_out);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      if (!is_gzip(std::string_view(reinterpret_cast<const char*>(z.next_in), z.avail_in))) {
        rc = Z_DATA_ERROR;  // bytes after the last member that do not start another one
        break;
      }
      inflateReset(&z);  // the next member
      continue;
    }
    if (rc != Z_OK) break;
    if (z.avail_in == 0 && z.avail_out != 0) {
      rc = Z_BUF_ERROR;  // all input read, no end of stream: cut short
      break;
    }
  }
  const std::string why = rc == Z_BUF_ERROR  ? "cut short: the stream ends before its trailer"
                          : z.msg != nullptr ? z.msg
                                             : fmt::format("zlib error {}", rc);
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw fail(why);
  return out;
}

}  // namespace pipetwin::trace_import
