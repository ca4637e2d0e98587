// The one byte-size grammar (xalloc/bytes.h) that every flag, environment variable and Python
// argument reads.
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "xalloc/bytes.h"
#include "xalloc/error.h"

using xalloc::parseByteSize;

TEST(ByteSize, PlainCountsAndBinaryUnits) {
  EXPECT_EQ(parseByteSize("0"), 0);
  EXPECT_EQ(parseByteSize("1048576"), 1048576);
  EXPECT_EQ(parseByteSize("512K"), 512ll << 10);
  EXPECT_EQ(parseByteSize("512M"), 512ll << 20);
  EXPECT_EQ(parseByteSize("2G"), 2ll << 30);
  EXPECT_EQ(parseByteSize("1T"), 1ll << 40);
  EXPECT_EQ(parseByteSize("100B"), 100);
}

TEST(ByteSize, WhatPythonAndTheFlagsAcceptedIsAcceptedEverywhere) {
  // XALLOC_CPU_LIMIT used to refuse these while xsched --memory-budget and Python took them.
  EXPECT_EQ(parseByteSize("2GB"), 2ll << 30);
  EXPECT_EQ(parseByteSize("8g"), 8ll << 30);
  EXPECT_EQ(parseByteSize("1.5KiB"), 1536);
  EXPECT_EQ(parseByteSize("1.5kib"), 1536);
  EXPECT_EQ(parseByteSize("512MiB"), 512ll << 20);
  EXPECT_EQ(parseByteSize(" 2 GB "), 2ll << 30);
  EXPECT_EQ(parseByteSize(".5K"), 512);
}

TEST(ByteSize, FractionsOfAByteAreDropped) {
  EXPECT_EQ(parseByteSize("1.9"), 1);
  EXPECT_EQ(parseByteSize("0.3K"), 307); // 307.2
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* bad : {"", " ", "-1", "+1", "12Q", "M", "K8", "1e6", "inf", "nan", "1.", "1.5.2",
                          "0x10", "2 G B", "2GiBs", "1KK", "lots"})
    EXPECT_FALSE(parseByteSize(bad).has_value()) << "accepted '" << bad << "'";
}

TEST(ByteSize, RefusesWhatDoesNotFitAnInt64) {
  EXPECT_EQ(parseByteSize("8589934591G"), 8589934591ll << 30); // just under 2^63
  EXPECT_FALSE(parseByteSize("8589934592G").has_value());      // 2^63
  EXPECT_FALSE(parseByteSize("1e30G").has_value());
  EXPECT_FALSE(parseByteSize("99999999999999999999999").has_value());
  EXPECT_EQ(parseByteSize("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
}

TEST(ByteSize, RequireNamesWhereAndWhat) {
  EXPECT_EQ(xalloc::requireByteSize("4K", "xsched memplan", "--budget"), 4096);
  try {
    xalloc::requireByteSize("4Q", "xsched memplan", "--budget");
    FAIL() << "accepted 4Q";
  } catch (const xalloc::InputError& e) {
    EXPECT_EQ(e.where(), "xsched memplan");
    EXPECT_EQ(e.message().rfind("--budget: cannot read '4Q' as a byte count", 0), 0u)
        << e.message();
  }
}
