/*
 * The writer thread's wake-up of the node's loop (ql_writer.h, the notify hook): an eventfd
 * watched by a uv_poll_t. Private to server/; node.c makes it with a threaded writer.
 *
 * DESIGN.
 * - Why not uv_async_t: libuv 1.44's uv_async_send marks the handle busy, writes its eventfd,
 *   then marks it pending, and the loop, woken by that write, spins (up to 997 rounds, then
 *   sched_yield) until the sender's second mark lands. On a machine of two cores the woken loop
 *   thread often preempts the writer between the two, so nearly every commit cost the loop a
 *   spin of tens of microseconds and a yield before it could answer (docs/performance.md, REST
 *   API). Here a send is one write(2) and the loop never waits for the sender.
 * - Coalescing: a send writes only when no wake-up is pending (an atomic flag); the loop clears
 *   the flag after draining the eventfd and before calling back, so a send that found it set
 *   happened before the callback's drain of the writer's answers, and one after it writes again.
 * - Threads: node_wake_send from any thread; the rest on the loop thread.
 * - Lifetime: stopping closes the poll handle; the eventfd stays open, and sends stay harmless,
 *   until node_wake_free, which the node calls once the writer thread has ended.
 */
#ifndef QL_NODE_WAKE_H
#define QL_NODE_WAKE_H

#include <uv.h>

typedef struct node_wake node_wake_t;

/* Watches a new eventfd on loop; cb(arg) runs on the loop after sends. 0 or a negative error. */
int node_wake_start(uv_loop_t *loop, void (*cb)(void *arg), void *arg, node_wake_t **out);
/* Any thread: makes the loop call cb once more (coalesced with sends not yet seen). */
void node_wake_send(node_wake_t *w);
/* Stops watching; closed(arg) runs once the handle is closed. cb is not called after this. */
void node_wake_stop(node_wake_t *w, void (*closed)(void *arg), void *arg);
/* Closes the eventfd and frees w: after node_wake_stop's closed, once no thread sends any more.
 * NULL is ignored. */
void node_wake_free(node_wake_t *w);

#endif
