#!/usr/bin/env bash
# Builds the C ABI: build/libubik.so (go build -buildmode=c-shared), the
# documented header build/ubik.h (a copy of capi/ubik.h), and the C test
# program build/ubik_test (gcc). Set UBIK_BUILD_DIR to build elsewhere.
#
#   bash capi/build.sh
#   gcc -Ibuild myhost.c -Lbuild -lubik -Wl,-rpath,"$PWD/build" -o myhost
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${UBIK_BUILD_DIR:-build}
mkdir -p "$out"
go build -buildmode=c-shared -o "$out/libubik.so" ./capi
# cgo writes its own header of the exports (no const, no documentation);
# ubik.h is the one to use.
rm -f "$out/libubik.h"
cp capi/ubik.h "$out/ubik.h"
gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g -I"$out" capi/test/ubik_test.c \
  -L"$out" -lubik -lpthread -Wl,-rpath,'$ORIGIN' -o "$out/ubik_test"
echo "built $out/libubik.so $out/ubik.h $out/ubik_test"
