# All dependencies come from Debian 12 packages (see scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(TBB REQUIRED)
find_package(fmt REQUIRED)
find_package(xtl REQUIRED)
find_package(xsimd REQUIRED)
find_package(xtensor REQUIRED)
find_package(ZLIB REQUIRED)  # nn/datasets: gzip-compressed IDX files (zlib1g-dev)
# OpenBLAS ships a config file with plain variables (no target): link its library by path and
# keep its headers private to the .cpp files that call CBLAS.
find_package(OpenBLAS CONFIG REQUIRED)
