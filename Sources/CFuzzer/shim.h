#pragma once
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's driver, for a binary whose `main` is its own (SwiftPM names the
 * entry point of an executable target itself). Only linked when built with
 * -sanitize=fuzzer. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
