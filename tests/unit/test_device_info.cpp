// Device facts that scope the timing database: the math libraries libtorch runs on, and
// recognising Debian's reference BLAS among them; the thread counts the math runs at.
#include <algorithm>
#include <filesystem>
#include <string>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "xalloc/math_libraries.h"
#include "xalloc/profiler/device_info.h"
#include "xalloc/threads.h"
#include "xalloc/tspass/threads.h"

using namespace xalloc;

// The math libraries scope the timing database: here, with libtorch loaded, they are the files
// it runs on (first libtorch_cpu, which holds the wheel's MKL and oneDNN), each existing with the
// size given, and asking again gives the same answer.
TEST(DeviceInfo, MathLibrariesNameTheFilesLibtorchRunsOn) {
  const std::string libs = xalloc::mathLibraries();
  const std::string first = xalloc::libraryPath(xalloc::splitLibraries(libs).at(0));
  EXPECT_EQ(std::filesystem::path(first).filename(), "libtorch_cpu.so") << libs;
  const auto entries = xalloc::splitLibraries(libs);
  EXPECT_EQ(entries.size(),
            static_cast<std::size_t>(std::count(libs.begin(), libs.end(), ';') + 1));
  for (const auto& entry : entries) {
    const std::string path = xalloc::libraryPath(entry);
    ASSERT_LT(path.size(), entry.size()) << entry;
    EXPECT_EQ(path, std::filesystem::canonical(path).string());
    EXPECT_EQ(entry, path + "@" + std::to_string(std::filesystem::file_size(path)));
  }
  EXPECT_EQ(xalloc::mathLibraries(), libs);
}

// Debian's reference BLAS is the alternative in a blas/ directory; OpenBLAS, BLIS or a copy
// elsewhere are not, nor is the reference LAPACK.
TEST(DeviceInfo, ReferenceBlasIsDebiansBlasAlternative) {
  const std::string ref = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0";
  EXPECT_EQ(xalloc::referenceBlas(ref + "@1000;/usr/lib/x86_64-linux-gnu/lapack/"
                                        "liblapack.so.3.11.0@2000"),
            ref);
  EXPECT_EQ(xalloc::referenceBlas("/l/lapack/liblapack.so.3@1;" + ref), ref);
  EXPECT_EQ(xalloc::referenceBlas("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3@1;"
                                  "/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3@2"),
            "");
  EXPECT_EQ(xalloc::referenceBlas("/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3@1"), "");
  EXPECT_EQ(xalloc::referenceBlas("/tmp/otherblas/libblas.so.3@1"), "");
  EXPECT_EQ(xalloc::referenceBlas(""), "");
}

// libtorch's and the BLAS's threads are set together, never above the CPUs this process has.
TEST(MathThreads, SetTogetherAndNeverAboveTheCpus) {
  const int before = at::get_num_threads();
  const bool openblas = xalloc::mathLibraries().find("openblas") != std::string::npos;
  EXPECT_EQ(xalloc::tspass::setMathThreads(1), 1);
  EXPECT_EQ(at::get_num_threads(), 1);
  if (openblas) {
    EXPECT_EQ(xalloc::blasThreads(), 1); // found through OpenBLAS's own symbols
  }
  const int cpus = xalloc::availableCpus();
  EXPECT_EQ(xalloc::tspass::setMathThreads(cpus + 7), cpus);
  EXPECT_EQ(at::get_num_threads(), cpus);
  if (openblas) {
    EXPECT_EQ(xalloc::blasThreads(), cpus);
  }
  EXPECT_EQ(xalloc::tspass::setMathThreads(0), cpus); // keeps libtorch's, aligns the BLAS
  xalloc::tspass::setMathThreads(before);
}
