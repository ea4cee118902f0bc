// tests/support/sanitizers.h — BAREYOLO_TEST_ASAN is 1 in a build with AddressSanitizer, for the
// few tests whose outcome it changes. GCC says so with __SANITIZE_ADDRESS__; clang 14 only
// through __has_feature.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define BAREYOLO_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BAREYOLO_TEST_ASAN 1
#endif
#endif
#ifndef BAREYOLO_TEST_ASAN
#define BAREYOLO_TEST_ASAN 0
#endif
