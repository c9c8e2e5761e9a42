/* tests/fuzz/stubs.c -- the few core symbols the bootstrap/id sources reach that belong to parts
 * the fuzz harnesses do not link (streams): a fuzzed process never runs a stream worker. */
#include "../../lib/stream/stream.h"

int tt_stream_in_worker(void)
{
    return 0;
}
