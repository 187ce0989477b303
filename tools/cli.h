/*
 * The `qilin` command: one binary, one function per top-level command. Each returns the process
 * exit code. See docs/cli.md.
 */
#ifndef QL_TOOLS_CLI_H
#define QL_TOOLS_CLI_H

/* qilin sim FILE.yaml ... : the simulation harness (tools/sim*.c). */
int ql_cmd_sim(int argc, char **argv);
/* qilin fsck DATA_DIR | --url URL [--schema NAME] : the store's invariants (tools/cmd_fsck.c). */
int ql_cmd_fsck(int argc, char **argv);
/* qilin store init|upgrade --url URL : a PostgreSQL store's schema (tools/cmd_store.c). */
int ql_cmd_store(int argc, char **argv);
/* qilin cluster reset-coordination ... : the coordination record (tools/cmd_cluster.c). */
int ql_cmd_cluster(int argc, char **argv);
/* qilin bench WHAT : the benchmarks (tools/bench*.c). */
int ql_cmd_bench(int argc, char **argv);
/* qilin passwd : a password hash for qilin.server.users (tools/cmd_passwd.c). */
int ql_cmd_passwd(int argc, char **argv);
/* qilin project|model|segment|job|auto-build ... : the REST client (tools/client*.c). argv[0]
 * is the command group. */
int ql_cmd_client(int argc, char **argv);
/* Whether name is one of the REST client's command groups. */
int ql_cli_is_client_command(const char *name);

#endif
