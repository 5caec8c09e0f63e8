/* keys.h — CURVE security for tcp:// sockets.
 *
 * Owns: a job's key pairs (one for ddptop's server sockets, one shared by
 * the job's own clients: agents, workers, attached viewers), the key file
 * (mode 0600), applying keys to sockets, and a ZAP handler that admits only
 * clients presenting the job's client public key — without it libzmq
 * accepts ANY client that knows the server key (libzmq 4.3.4, measured). ipc:// sockets do
 * not use this: they live in a 0700 directory.
 */
#ifndef DDPTOP_CURVE_H
#define DDPTOP_CURVE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char pub[41], sec[41]; /* Z85, 40 characters */
} CurveKeyPair;

typedef struct {
    CurveKeyPair server, client;
} JobKeys;

/* Fresh key pairs. Returns 0 or -1 with err (libzmq without CURVE). */
int keys_generate(JobKeys *k, char *err, size_t errlen);
/* Write a key file readable by its owner only; refuses to overwrite. */
int keys_write(const char *path, const JobKeys *k, char *err, size_t errlen);
/* Read a key file; refuses one that group or others can read. */
int keys_read(const char *path, JobKeys *k, char *err, size_t errlen);

/* Make sock a CURVE server (before bind) whose clients pass the ZAP check. */
int keys_server_socket(void *sock, const JobKeys *k, char *err, size_t errlen);
/* Make sock a CURVE client of the job (before connect). */
int keys_client_socket(void *sock, const JobKeys *k, char *err, size_t errlen);

typedef struct ZapHandler ZapHandler;
/* Serve ZAP requests on zctx (inproc://zeromq.zap.01) in a thread: only the
 * client public key of k is admitted; every refusal is counted. */
int zap_start(ZapHandler **out, void *zctx, const JobKeys *k, char *err, size_t errlen);
unsigned long zap_refused(const ZapHandler *z);
void zap_stop(ZapHandler **z);

/* tcp://HOST:PORT (HOST may be [v6]) -> host, port. Returns 0 or -1. */
int keys_tcp_split(const char *ep, char *host, size_t hostlen, int *port);
/* localhost, 127.0.0.0/8, ::1. */
bool keys_host_is_loopback(const char *host);
/* A job's telemetry endpoint beside its control endpoint: tcp://H:P ->
 * tcp://H:P+1; ipc://DIR/ctl -> ipc://DIR/tel; ipc://PATH -> ipc://PATH.tel.
 * Returns 0 or -1 (not tcp/ipc, no port, port 65535). */
int keys_tel_endpoint(const char *ctl_ep, char *out, size_t outlen);

/* True for tcp:// endpoints bound to anything but loopback. */
bool keys_endpoint_needs_curve(const char *endpoint);

/* The environment variable naming a key file for workers and agents. */
#define KEYS_ENV "DDPTOP_KEYS"

#endif
