/* export_jsonl.c — `ddptop export --jsonl`: one JSON object per record,
 * every key of every frame in its order (unknown ones included), with the
 * arrival times in front. See export.h; the format in docs/RECORDING.md.
 *
 * Owns: the generic msgpack-to-JSON walk and the records ddptop writes
 * itself (process start and exit, notes). Frames are walked only after
 * codec_decode accepted them, so depth and sizes are already bounded.
 * Main thread only.
 */
#include "record/export.h"

#include <inttypes.h>
#include <stdint.h>

#include <msgpack.h>

#include "base/json.h"
#include "record/export_common.h"
#include "wire/codec.h"

/* Any msgpack value as JSON: binary data as hex. */
static void put_msgpack(Json *w, const msgpack_object *o)
{
    char key[24];
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: json_null(w); break;
    case MSGPACK_OBJECT_BOOLEAN: json_bool(w, o->via.boolean); break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER: json_uint(w, o->via.u64); break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: json_int(w, o->via.i64); break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: json_double(w, o->via.f64); break;
    case MSGPACK_OBJECT_STR: json_strn(w, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_BIN: json_hex(w, o->via.bin.ptr, o->via.bin.size); break;
    case MSGPACK_OBJECT_EXT: json_hex(w, o->via.ext.ptr, o->via.ext.size); break;
    case MSGPACK_OBJECT_ARRAY:
        json_arr(w);
        for (uint32_t i = 0; i < o->via.array.size; i++) put_msgpack(w, &o->via.array.ptr[i]);
        json_arr_end(w);
        break;
    case MSGPACK_OBJECT_MAP:
        json_obj(w);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            /* JSON keys are strings: other keys (only in unknown nested
             * values) are written as their JSON text, quoted. */
            if (kv->key.type == MSGPACK_OBJECT_STR) {
                json_keyn(w, kv->key.via.str.ptr, kv->key.via.str.size);
            } else {
                if (kv->key.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                    snprintf(key, sizeof key, "%" PRIu64, kv->key.via.u64);
                else if (kv->key.type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                    snprintf(key, sizeof key, "%" PRId64, kv->key.via.i64);
                else
                    snprintf(key, sizeof key, "?");
                json_key(w, key);
            }
            put_msgpack(w, &kv->val);
        }
        json_obj_end(w);
        break;
    default: json_null(w); break;
    }
}

/* Open a record's object with its source and arrival times. */
static void record_begin(Json *w, const RecEntry *e, const char *src)
{
    json_obj(w);
    json_kv_str(w, "_src", src);
    json_kv_uint(w, "_rec", e->index);
    json_kv_int(w, "_t_ns", e->t_ns);
    json_kv_int(w, "_wall_ns", e->wall_ns);
}

static void record_end(Json *w)
{
    json_obj_end(w);
    json_text(w, "\n");
}

static void put_frame(Json *w, const RecEntry *e)
{
    Msg m;
    char derr[256];
    int rc = codec_decode(e->data, e->len, &m, derr, sizeof derr);
    record_begin(w, e, rec_source_name(e->src));
    if (rc < 0) {
        /* Recorded as received, but not a frame anyone can read. */
        json_kv_uint(w, "_bytes", e->len);
        json_kv_str(w, "_error", derr);
        record_end(w);
        return;
    }
    msg_done(&m);
    /* Every key of the frame, in its order, unknown ones included: the
     * pre-scan in codec_decode has bounded what this walk can meet. */
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    if (msgpack_unpack_next(&up, (const char *)e->data, e->len, &off) == MSGPACK_UNPACK_SUCCESS &&
        up.data.type == MSGPACK_OBJECT_MAP) {
        const msgpack_object_map *mp = &up.data.via.map;
        for (uint32_t i = 0; i < mp->size; i++) {
            json_keyn(w, mp->ptr[i].key.via.str.ptr, mp->ptr[i].key.via.str.size);
            put_msgpack(w, &mp->ptr[i].val);
        }
    }
    msgpack_unpacked_destroy(&up);
    record_end(w);
}

/* A START or EXIT record: the rank's process, and for EXIT how it ended. */
static void put_proc(Json *w, const RecEntry *e)
{
    RecProc p;
    record_begin(w, e, rec_source_name(e->src));
    if (rec_proc_decode(e, &p) == 0) {
        json_kv_int(w, "r", p.rank);
        json_kv_int(w, "pid", p.pid);
        if (e->src == REC_SRC_EXIT) {
            char how[32];
            export_wait_text(how, sizeof how, p.wait_status);
            json_kv_int(w, "wait_status", p.wait_status);
            json_kv_str(w, "status", how);
            json_kv_str(w, "how", p.how);
        }
    } else {
        json_kv_str(w, "_error", "malformed process record");
    }
    record_end(w);
}

static void put_note(Json *w, const RecEntry *e)
{
    static const char *const level[] = { "info", "warn", "error" };
    RecNote nt;
    record_begin(w, e, "note");
    if (rec_note_decode(e, &nt) == 0) {
        json_kv_int(w, "r", nt.rank);
        json_kv_str(w, "level", nt.level >= 0 && nt.level <= 2 ? level[nt.level] : "info");
        json_kv_str(w, "text", nt.text);
    } else {
        json_kv_str(w, "_error", "malformed note record");
    }
    record_end(w);
}

int export_jsonl(const Recording *r, FILE *f, char *err, size_t errlen)
{
    Json w;
    json_init_file(&w, f);
    for (size_t i = 0; i < r->n; i++) {
        const RecEntry *e = &r->recs[i];
        switch (e->src) {
        case REC_SRC_TEL:
        case REC_SRC_CTL:
        case REC_SRC_SENT: put_frame(&w, e); break;
        case REC_SRC_START:
        case REC_SRC_EXIT: put_proc(&w, e); break;
        case REC_SRC_NOTE: put_note(&w, e); break;
        default:
            /* A newer writer's record kind: say it is there. */
            record_begin(&w, e, "unknown");
            json_kv_int(&w, "_src_id", e->src);
            json_kv_uint(&w, "_bytes", e->len);
            record_end(&w);
            break;
        }
    }
    return export_check_stream(f, "the JSON lines", err, errlen);
}
