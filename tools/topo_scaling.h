/* topo_scaling.h -- tutti-topo --scaling (topo_scaling.c): the what-if model of a data-parallel
 * job's scaling. */
#ifndef TT_TOPO_SCALING_H
#define TT_TOPO_SCALING_H

/* The whole command line of tutti-topo --scaling; the exit status. */
int topo_scaling(int argc, char **argv);

#endif
