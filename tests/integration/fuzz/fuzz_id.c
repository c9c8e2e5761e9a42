/*
 * fuzz_id.c -- libFuzzer harness for the id parsers: tutti_id_from_string on any string and
 * tt_id_decode on any 128 bytes must refuse (with a reason) or accept, never crash, and
 * anything accepted must print back to an id that parses to the same bytes.
 */
#include "../../../lib/boot/id.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    tutti_id_t id, again;
    struct tt_id_info info;
    char back[TUTTI_ID_STRLEN];

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    if (tutti_id_from_string(s, &id) == TUTTI_SUCCESS) {
        if (tutti_id_to_string(&id, back, sizeof(back)) != TUTTI_SUCCESS ||
            tutti_id_from_string(back, &again) != TUTTI_SUCCESS ||
            memcmp(&id, &again, sizeof(id)) != 0)
            abort();
    }
    free(s);
    if (size >= TUTTI_ID_BYTES) {
        memcpy(&id, data, sizeof(id));
        (void)tt_id_decode(&id, &info);
    }
    return 0;
}
