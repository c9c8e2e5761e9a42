/* init.c -- tt_base_init (log.h): what every entry point does before anything else. */
#include "lib/base/log.h"
#include "lib/base/trace.h"

void tt_base_init(void)
{
    tt_log_init();
    tt_trace_init();
}
