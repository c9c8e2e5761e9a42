/*
 * trace.h -- TUTTI_TRACE: a Chrome / Perfetto trace of what this process did.
 *
 * Events are buffered in memory (a mutex-guarded array; at most TT_TRACE_MAX, then counted as
 * dropped) and written when the process exits or tutti_trace_flush is called. The file is
 * shared by the ranks of a host: each rank appends its events under flock(), the first writer
 * opens the JSON array (the format lets the closing bracket go missing), and local rank 0 of
 * the first communicator empties the file before the barrier that ends tutti_comm_init, so
 * nobody has written yet. A name containing %r gets one file per rank instead. Each rank is a
 * process (pid = rank) in the viewer; each thread a track, and each lane (channel) of an
 * operation a track under its thread.
 */
#ifndef TT_TRACE_H
#define TT_TRACE_H

#include <stddef.h>

/* Non-zero when TUTTI_TRACE is set (read once by tt_trace_init). */
extern int tt_trace_on;

void tt_trace_init(void);

/* Microseconds on the trace's clock (CLOCK_MONOTONIC: comparable across ranks of a host). */
double tt_trace_us(void);

/*
 * Record a complete event [ts, ts + dur) on the calling thread's track (lane < 0) or on its
 * lane track. args is the text of a JSON object, or NULL.
 */
void tt_trace_add(const char *cat, const char *name, double ts, double dur, int lane,
                  const char *args);

/* Name the calling thread's track ("main", "stream 2"). */
void tt_trace_thread_name(const char *name);

/* Called once a communicator knows its local rank, before its closing barrier. */
void tt_trace_comm_ready(int local_rank);

#endif
