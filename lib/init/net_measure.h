/*
 * net_measure.h -- TUTTI_TUNE_LINKS=measure: the tuner's network link measured at init.
 */
#ifndef TT_NET_MEASURE_H
#define TT_NET_MEASURE_H

#include "lib/core/comm.h"

/* A collective on c (connected, ring set, on more than one node): exchanges with the ring's
 * neighbours, timed; every rank's tuner gets the same network latency and bandwidth. */
tutti_result_t tt_comm_measure_net(struct tutti_comm *c);

#endif
