/*
 * fuzz_boot.c -- libFuzzer harness for the bootstrap's incoming-connection parser: whatever
 * bytes a peer sends, in whatever pieces, the reader must not crash, read out of bounds,
 * allocate beyond what arrived (rounded) or accept a connection without the secret.
 * The input's first byte chooses how the rest is cut into arrivals.
 */
#include "../../../lib/boot/bootstrap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The secret the harness's bootstrap expects: seeds in corpus/boot use it. */
static const unsigned char secret[TT_SECRET_BYTES] = "tutti-fuzz-secret-0123456789abcd";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct tt_boot *b = tt_boot_fuzz_new(4, secret);
    size_t piece;

    if (!b || size == 0) {
        tt_boot_close(b);
        return 0;
    }
    piece = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    while (size > 0) {
        size_t n = piece < size ? piece : size;
        if (tt_boot_fuzz_feed(b, data, n) != 0)
            break; /* dropped: a stranger or a malformed header */
        data += n;
        size -= n;
    }
    (void)tt_boot_fuzz_queued(b);
    tt_boot_close(b);
    return 0;
}
