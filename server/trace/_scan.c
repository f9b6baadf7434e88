/* A piece of a Kineto event array ("[{...}, ...]") scanned into per-event columns in one pass.

   This is the fast path of columns.py's reading (scan.py turns what it returns into a piece's
   columns). It reads exactly what schema.Event and schema.Args read, with the same types, and
   gives up (returns None) on anything it does not read the same way as msgspec's typed decode:
   JSON that is not valid, a field of an unexpected type, an integer out of range, text that is
   not UTF-8 where it becomes a value, a \u escape of a surrogate, a key spelled with escapes,
   deep nesting. The caller then reads the piece the usual way, so nothing here decides what a
   damaged trace becomes; it only has to be at least as strict as msgspec.

   Texts become codes into a list of distinct values per column (first appearance), numbers
   int64 or float64 with the schema's absent values (-1, NaN), and each event's byte span is
   kept for the few events read from their raw text (counters, metadata). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---- columns ---- */

enum { T_PH, T_CAT, T_NAME, T_PID, T_TID, T_ID, T_BP, T_GRID, T_BLOCK, T_IDIMS, T_IDIMS_OLD, T_ITYPE, T_STACK,
       T_GROUP, T_META_NAME, T_LABELS, N_TEXT };
enum { I_EXT, I_EXT_OLD, I_CORR, I_DEVICE, I_STREAM, I_REGS, I_SHMEM, I_BYTES, I_SEQ, I_FWD, I_PYID, I_PYPARENT,
       I_PYMOD, I_DEVTYPE, I_DEVID, I_ADDR, I_MEMBYTES, I_SORT, N_INT };
enum { F_TS, F_DUR, F_BPSM, F_WPSM, F_OCC, F_ALLOC, F_RESERVED, N_FLOAT };

/* How a field's value is read (its type in schema.py). */
enum {
    K_STR,      /* str; absent is "" */
    K_STR_NONE, /* str | None; absent or null: no value (-1) */
    K_BP,       /* str | None; absent or null is the value None */
    K_ID,       /* int | str | None; absent or null: no value */
    K_NUM,      /* int | float, as float64; absent NaN */
    K_INT,      /* int64; absent -1 */
    K_INT_NONE, /* int64 | None; absent or null -1 */
    K_DIMS,     /* list[int64] | None, as a tuple; absent or null: no value */
    K_RAW,      /* any value, as its JSON text; absent: no value */
    K_ARGS,     /* the args object */
};

typedef struct { const char *key; int kind; int column; } Field;

static const Field EVENT_FIELDS[] = {
    {"ph", K_STR, T_PH}, {"cat", K_STR, T_CAT}, {"name", K_STR, T_NAME}, {"pid", K_ID, T_PID},
    {"tid", K_ID, T_TID}, {"ts", K_NUM, F_TS}, {"dur", K_NUM, F_DUR}, {"id", K_ID, T_ID}, {"bp", K_BP, T_BP},
    {"args", K_ARGS, 0}, {NULL, 0, 0}};

static const Field ARG_FIELDS[] = {
    {"External id", K_INT, I_EXT}, {"external id", K_INT, I_EXT_OLD}, {"correlation", K_INT, I_CORR},
    {"device", K_INT, I_DEVICE}, {"stream", K_INT, I_STREAM}, {"grid", K_DIMS, T_GRID},
    {"block", K_DIMS, T_BLOCK}, {"registers per thread", K_INT, I_REGS}, {"shared memory", K_INT, I_SHMEM},
    {"blocks per SM", K_NUM, F_BPSM}, {"warps per SM", K_NUM, F_WPSM},
    {"est. achieved occupancy %", K_NUM, F_OCC}, {"bytes", K_INT, I_BYTES}, {"Input Dims", K_RAW, T_IDIMS},
    {"Input dims", K_RAW, T_IDIMS_OLD}, {"Input type", K_RAW, T_ITYPE}, {"Call stack", K_STR_NONE, T_STACK},
    {"Process Group Name", K_ID, T_GROUP}, {"Sequence number", K_INT, I_SEQ}, {"Fwd thread id", K_INT, I_FWD},
    {"Python id", K_INT, I_PYID}, {"Python parent id", K_INT_NONE, I_PYPARENT},
    {"Python module id", K_INT, I_PYMOD}, {"Device Type", K_INT, I_DEVTYPE}, {"Device Id", K_INT, I_DEVID},
    {"Addr", K_INT, I_ADDR}, {"Bytes", K_INT, I_MEMBYTES}, {"Total Allocated", K_NUM, F_ALLOC},
    {"Total Reserved", K_NUM, F_RESERVED}, {"name", K_STR_NONE, T_META_NAME}, {"labels", K_STR_NONE, T_LABELS},
    {"sort_index", K_INT, I_SORT}, {NULL, 0, 0}};

/* Keys are looked up in a small open-addressing table by a hash of their length and end characters
   (enough to tell the known keys mostly apart; the key itself is compared). */
#define KEY_SLOTS 128
typedef struct { const Field *field; size_t len; uint64_t hash; } KeySlot;
static KeySlot event_keys[KEY_SLOTS], arg_keys[KEY_SLOTS];

static inline uint64_t key_hash(const char *s, size_t n) {
    return n ? n * 31 + (unsigned char)s[0] * 7 + (unsigned char)s[n - 1] * 3 + (unsigned char)s[n / 2] : 0;
}

/* A hash of s[0:n], eight bytes at a time (names of templated kernels run to thousands of bytes). */
static inline uint64_t text_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
    }
    w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 32);
}

static void build_keys(KeySlot *slots, const Field *fields) {
    for (const Field *f = fields; f->key; f++) {
        size_t n = strlen(f->key);
        uint64_t h = key_hash(f->key, n);
        size_t i = h & (KEY_SLOTS - 1);
        while (slots[i].field) i = (i + 1) & (KEY_SLOTS - 1);
        slots[i].field = f, slots[i].len = n, slots[i].hash = h;
    }
}

static const Field *find_key(const KeySlot *slots, const char *s, size_t n) {
    uint64_t h = key_hash(s, n);
    for (size_t i = h & (KEY_SLOTS - 1); slots[i].field; i = (i + 1) & (KEY_SLOTS - 1))
        if (slots[i].hash == h && slots[i].len == n && memcmp(slots[i].field->key, s, n) == 0) return slots[i].field;
    return NULL;
}

/* ---- growable arrays ---- */

typedef struct { char *data; size_t len, cap; } Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_RawRealloc(b->data, cap);
    if (!data) return -1;
    b->data = data, b->cap = cap;
    return 0;
}

/* ---- interning: the distinct tokens of a text column, in order of first appearance ---- */

typedef struct { const char *key; size_t len; uint64_t hash; int32_t code; } Slot;
typedef struct {
    Slot *slots;
    size_t cap;
    Buf tokens;  /* the distinct tokens (Slot) in code order: made Python values once the scan is over */
    Slot last;   /* the token seen last: consecutive events mostly repeat pid, tid, ph and cat */
} Interner;

static int interner_init(Interner *t) {
    t->cap = 64;
    t->slots = PyMem_RawCalloc(t->cap, sizeof(Slot));
    return t->slots ? 0 : -1;
}

static void interner_free(Interner *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->tokens.data);
}

static int interner_grow(Interner *t) {
    size_t cap = t->cap * 2;
    Slot *slots = PyMem_RawCalloc(cap, sizeof(Slot));
    if (!slots) return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].key) continue;
        size_t j = t->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    PyMem_RawFree(t->slots);
    t->slots = slots, t->cap = cap;
    return 0;
}

/* The code of token s[0:n]; -1 when memory runs out. Runs without the GIL. */
static int32_t intern(Interner *t, const char *s, size_t n) {
    if (t->last.key && t->last.len == n && memcmp(t->last.key, s, n) == 0) return t->last.code;
    uint64_t h = text_hash(s, n);
    size_t i = h & (t->cap - 1);
    for (; t->slots[i].key; i = (i + 1) & (t->cap - 1))
        if (t->slots[i].hash == h && t->slots[i].len == n && memcmp(t->slots[i].key, s, n) == 0) break;
    if (t->slots[i].key) {
        t->last = t->slots[i];
        return t->last.code;
    }
    Slot slot = {s, n, h, (int32_t)(t->tokens.len / sizeof(Slot))};
    if (buf_reserve(&t->tokens, sizeof slot)) return -1;
    memcpy(t->tokens.data + t->tokens.len, &slot, sizeof slot), t->tokens.len += sizeof slot;
    t->slots[i] = t->last = slot;
    if ((size_t)slot.code * 2 + 2 > t->cap && interner_grow(t)) return -1;
    return slot.code;
}

/* ---- values made from tokens (NULL without an exception: give up the fast path) ---- */

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

/* A JSON string token (quotes included, already checked by scan_string) as str. */
static PyObject *make_str(const char *s, size_t n) {
    s++, n -= 2;
    if (!memchr(s, '\\', n)) {
        PyObject *v = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
        if (!v && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();  /* msgspec refuses it too */
        return v;
    }
    char *out = PyMem_Malloc(n), *o = out;  /* unescaped text is never longer */
    if (!out) return PyErr_NoMemory();
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\') { *o++ = s[i]; continue; }
        char c = s[++i];
        switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u;
            hex4(s + i + 1, &u);  /* checked by scan_string, surrogates refused there */
            i += 4;
            if (u < 0x80) *o++ = (char)u;
            else if (u < 0x800) *o++ = (char)(0xC0 | (u >> 6)), *o++ = (char)(0x80 | (u & 0x3F));
            else *o++ = (char)(0xE0 | (u >> 12)), *o++ = (char)(0x80 | ((u >> 6) & 0x3F)),
                 *o++ = (char)(0x80 | (u & 0x3F));
            break;
        }
        default: *o++ = c;  /* " \ / */
        }
    }
    PyObject *v = PyUnicode_DecodeUTF8(out, o - out, NULL);
    PyMem_Free(out);
    if (!v && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return v;
}

/* An integer token (checked by scan_number) as int, of any size as msgspec gives. */
static PyObject *make_int(const char *s, size_t n) {
    char small[32], *text = n < sizeof small ? small : PyMem_Malloc(n + 1);
    if (!text) return PyErr_NoMemory();
    memcpy(text, s, n);
    text[n] = 0;
    PyObject *v = PyLong_FromString(text, NULL, 10);
    if (text != small) PyMem_Free(text);
    return v;
}

static PyObject *make_id(const char *s, size_t n) { return s[0] == '"' ? make_str(s, n) : make_int(s, n); }

static PyObject *make_raw(const char *s, size_t n) { return PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace"); }

/* bp: a text, or null (absent or given), which is the value None */
static PyObject *make_bp(const char *s, size_t n) {
    if (s[0] != '"') Py_RETURN_NONE;
    return make_str(s, n);
}

static int parse_int64(const char *s, size_t n, int64_t *out);

/* A list of integers (checked by scan_dims) as a tuple. */
static PyObject *make_dims(const char *s, size_t n) {
    PyObject *items = PyList_New(0);
    if (!items) return NULL;
    const char *end = s + n - 1;  /* the closing ']' */
    for (const char *p = s + 1; p < end;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == ',')) p++;
        if (p >= end) break;
        const char *q = p;
        while (q < end && (*q == '-' || (*q >= '0' && *q <= '9'))) q++;
        int64_t v;
        parse_int64(p, q - p, &v);
        PyObject *item = PyLong_FromLongLong(v);
        if (!item || PyList_Append(items, item)) { Py_XDECREF(item); Py_DECREF(items); return NULL; }
        Py_DECREF(item);
        p = q;
    }
    PyObject *tuple = PyList_AsTuple(items);
    Py_DECREF(items);
    return tuple;
}

typedef PyObject *(*MakeValue)(const char *s, size_t n);

/* How each text column's tokens become values. */
static const MakeValue MAKERS[N_TEXT] = {
    [T_PH] = make_str, [T_CAT] = make_str, [T_NAME] = make_str, [T_PID] = make_id, [T_TID] = make_id,
    [T_ID] = make_id, [T_BP] = make_bp, [T_GRID] = make_dims, [T_BLOCK] = make_dims, [T_IDIMS] = make_raw,
    [T_IDIMS_OLD] = make_raw, [T_ITYPE] = make_raw, [T_STACK] = make_str, [T_GROUP] = make_id,
    [T_META_NAME] = make_str, [T_LABELS] = make_str};

/* The values of a column's distinct tokens, with the GIL; NULL without an exception where one of them
   gives up the fast path. */
static PyObject *values_of(const Interner *t, MakeValue make) {
    size_t n = t->tokens.len / sizeof(Slot);
    PyObject *values = PyList_New((Py_ssize_t)n);
    if (!values) return NULL;
    for (size_t i = 0; i < n; i++) {
        const Slot *slot = (const Slot *)t->tokens.data + i;
        PyObject *value = make(slot->key, slot->len);
        if (!value) { Py_DECREF(values); return NULL; }
        PyList_SET_ITEM(values, (Py_ssize_t)i, value);
    }
    return values;
}

/* ---- the scanner ---- */

typedef struct {
    const char *p, *end;
    int giveup;        /* the text is not read the fast way (not an error) */
    int args_seen;     /* a second args object would replace the first whole in msgspec */
    int escaped;       /* the last string scanned holds escapes */
    PyThreadState *released;  /* the GIL, released while scanning (taken for a number converted in full) */
    Interner text[N_TEXT];
    Buf codes[N_TEXT], ints[N_INT], floats[N_FLOAT], spans;
    /* the current event's values */
    int32_t cur_code[N_TEXT];
    int64_t cur_int[N_INT];
    double cur_float[N_FLOAT];
} Scan;

#define GIVE_UP(sc) do { (sc)->giveup = 1; return -1; } while (0)

static unsigned char is_space[256];

static inline void skip_ws(Scan *sc) {
    const char *p = sc->p;
    while (p < sc->end && is_space[(unsigned char)*p]) p++;
    sc->p = p;
}

/* The first byte from p that ends a run of plain string bytes: '"', '\\' or a control character. */
static inline const char *plain_run(const char *p, const char *end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    for (; end - p >= 16; p += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)p);
        /* unsigned bytes < 0x20: max(bytes, 0x20) == 0x20 and bytes != 0x20 */
        __m128i control = _mm_andnot_si128(_mm_cmpeq_epi8(bytes, space),
                                           _mm_cmpeq_epi8(_mm_max_epu8(bytes, space), space));
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)),
                                    control);
        int mask = _mm_movemask_epi8(stop);
        if (mask) return p + __builtin_ctz(mask);
    }
#endif
    while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
    return p;
}

/* A string token from sc->p (at '"'); sets sc->p past it and sc->escaped to whether it holds escapes. */
static int scan_string(Scan *sc) {
    sc->escaped = 0;
    const char *p = sc->p + 1, *end = sc->end;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end || (unsigned char)*p < 0x20) GIVE_UP(sc);
        if (*p == '"') break;
        if (++p >= end) GIVE_UP(sc);  /* the escaped character */
        sc->escaped = 1;
        switch (*p) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't': p++; break;
        case 'u': {
            unsigned u;
            if (end - p < 5 || hex4(p + 1, &u) || (u >= 0xD800 && u <= 0xDFFF)) GIVE_UP(sc);
            p += 5;
            break;
        }
        default: GIVE_UP(sc);
        }
    }
    sc->p = p + 1;
    return 0;
}

/* A number token by JSON's grammar; *integer says whether it has no fraction or exponent. */
static int scan_number(Scan *sc, int *integer) {
    const char *p = sc->p, *end = sc->end;
    if (p < end && *p == '-') p++;
    if (p >= end) GIVE_UP(sc);
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (p < end && *p >= '0' && *p <= '9') p++;
    else GIVE_UP(sc);
    *integer = 1;
    if (p < end && *p == '.') {
        *integer = 0;
        if (++p >= end || *p < '0' || *p > '9') GIVE_UP(sc);
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        *integer = 0;
        if (++p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') GIVE_UP(sc);
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    sc->p = p;
    return 0;
}

static int parse_int64(const char *s, size_t n, int64_t *out) {
    int negative = s[0] == '-';
    uint64_t v = 0;
    for (size_t i = negative; i < n; i++) {
        unsigned d = s[i] - '0';
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    if (v > (uint64_t)INT64_MAX + negative) return -1;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* A decimal number of at most 15 significant digits... exactly: digits that fit 2^53 over (or times) a power
   of ten up to 10^22 are both exact doubles, and one IEEE division (multiplication) of exact values is
   the correctly rounded result, as a full conversion gives it (Clinger's fast path). 0 where it does not
   apply: the caller converts the text in full. */
static int fast_double(const char *s, size_t n, double *out) {
    static const double powers[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s, *end = s + n;
    int negative = *p == '-';
    p += negative;
    uint64_t digits = 0;
    int count = 0, scale = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (++count > 19) return 0;
        digits = digits * 10 + (*p - '0');
    }
    if (p < end && *p == '.')
        for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
            if (++count > 19) return 0;
            digits = digits * 10 + (*p - '0'), scale--;
        }
    if (p < end) {  /* an exponent */
        p++;
        int minus = 0, e = 0;
        if (*p == '+' || *p == '-') minus = *p++ == '-';
        for (; p < end; p++) {
            if (e > 1000) return 0;
            e = e * 10 + (*p - '0');
        }
        scale += minus ? -e : e;
    }
    if (digits > (1ULL << 53) || scale < -22 || scale > 22) return 0;
    double v = (double)digits;
    v = scale < 0 ? v / powers[-scale] : v * powers[scale];
    *out = negative ? -v : v;
    return 1;
}

static int scan_literal(Scan *sc, const char *word, size_t n) {
    if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, word, n) != 0) GIVE_UP(sc);
    sc->p += n;
    return 0;
}

#define MAX_DEPTH 64

/* Containers (arrays and objects) are read alike: open_container before the first element, next_element
   after each. Both leave sc->p at the next token. */

/* Past `open`: 1 when the container closes at once (`close`), 0 when an element follows, -1 not a container. */
static int open_container(Scan *sc, char open, char close) {
    if (sc->p >= sc->end || *sc->p != open) GIVE_UP(sc);
    sc->p++;
    skip_ws(sc);
    if (sc->p < sc->end && *sc->p == close) { sc->p++; return 1; }
    return 0;
}

/* After an element: 1 past `close`, 0 past a ',' (another element follows), -1 anything else. */
static int next_element(Scan *sc, char close) {
    skip_ws(sc);
    if (sc->p >= sc->end) GIVE_UP(sc);
    if (*sc->p == close) { sc->p++; return 1; }
    if (*sc->p != ',') GIVE_UP(sc);
    sc->p++;
    skip_ws(sc);
    return 0;
}

/* Past a key's ':' (sc->p after the key). */
static int key_colon(Scan *sc) {
    skip_ws(sc);
    if (sc->p >= sc->end || *sc->p != ':') GIVE_UP(sc);
    sc->p++;
    skip_ws(sc);
    return 0;
}

/* Any value, checked and passed over. */
static int skip_value(Scan *sc, int depth) {
    if (sc->p >= sc->end) GIVE_UP(sc);
    int integer;
    switch (*sc->p) {
    case '"': return scan_string(sc);
    case 't': return scan_literal(sc, "true", 4);
    case 'f': return scan_literal(sc, "false", 5);
    case 'n': return scan_literal(sc, "null", 4);
    case '[': case '{': {
        char open = *sc->p, close = open == '[' ? ']' : '}';
        if (depth >= MAX_DEPTH) GIVE_UP(sc);
        int done = open_container(sc, open, close);
        while (!done) {
            if (open == '{' && (sc->p >= sc->end || *sc->p != '"' || scan_string(sc) || key_colon(sc))) GIVE_UP(sc);
            if (skip_value(sc, depth + 1)) return -1;
            done = next_element(sc, close);
        }
        return done < 0 ? -1 : 0;
    }
    default: return scan_number(sc, &integer);
    }
}

static int is_null(Scan *sc) {
    return sc->end - sc->p >= 4 && memcmp(sc->p, "null", 4) == 0;
}

/* Intern the token s..sc->p into column `column`. */
static int set_code(Scan *sc, int column, const char *s) {
    int32_t code = intern(&sc->text[column], s, sc->p - s);
    if (code < 0) return -1;
    sc->cur_code[column] = code;
    return 0;
}

/* A list of int64 (grid, block). */
static int scan_dims(Scan *sc) {
    int done = open_container(sc, '[', ']');
    while (!done) {
        const char *s = sc->p;
        int integer;
        int64_t v;
        if (scan_number(sc, &integer) || !integer || parse_int64(s, sc->p - s, &v)) GIVE_UP(sc);
        done = next_element(sc, ']');
    }
    return done < 0 ? -1 : 0;
}

static int scan_object(Scan *sc, const KeySlot *keys);

/* The value of a known field. */
static int scan_field(Scan *sc, const Field *f) {
    const char *s = sc->p;
    int integer;
    if (s >= sc->end) GIVE_UP(sc);
    switch (f->kind) {
    case K_STR:
        if (*s != '"' || scan_string(sc)) GIVE_UP(sc);
        return set_code(sc, f->column, s);
    case K_STR_NONE: case K_BP:
        if (is_null(sc)) {
            sc->p += 4;
            if (f->kind == K_BP) return set_code(sc, f->column, s);
            sc->cur_code[f->column] = -1;
            return 0;
        }
        if (*s != '"' || scan_string(sc)) GIVE_UP(sc);
        return set_code(sc, f->column, s);
    case K_ID:
        if (is_null(sc)) { sc->p += 4; sc->cur_code[f->column] = -1; return 0; }
        if (*s == '"') { if (scan_string(sc)) GIVE_UP(sc); }
        else if (scan_number(sc, &integer) || !integer) GIVE_UP(sc);
        return set_code(sc, f->column, s);
    case K_NUM: {
        if (*s != '-' && (*s < '0' || *s > '9')) GIVE_UP(sc);
        if (scan_number(sc, &integer)) return -1;
        size_t n = sc->p - s;
        double v;
        int64_t i;
        if (integer) {
            if (n > 18 || parse_int64(s, n, &i)) GIVE_UP(sc);  /* beyond int64: msgspec keeps an int */
            v = (double)i;
        } else if (!fast_double(s, n, &v)) {
            char text[64];
            if (n >= sizeof text) GIVE_UP(sc);
            memcpy(text, s, n);
            text[n] = 0;
            char *stop;
            PyEval_RestoreThread(sc->released);
            v = PyOS_string_to_double(text, &stop, NULL);
            if (v == -1.0 && PyErr_Occurred()) PyErr_Clear(), stop = NULL;  /* cannot happen: scan_number checked it */
            sc->released = PyEval_SaveThread();
            if (stop != text + n || isinf(v)) GIVE_UP(sc);  /* msgspec: "Number out of range" */
        }
        sc->cur_float[f->column] = v;
        return 0;
    }
    case K_INT: case K_INT_NONE: {
        if (f->kind == K_INT_NONE && is_null(sc)) { sc->p += 4; sc->cur_int[f->column] = -1; return 0; }
        if (*s != '-' && (*s < '0' || *s > '9')) GIVE_UP(sc);
        int64_t v;
        if (scan_number(sc, &integer) || !integer || parse_int64(s, sc->p - s, &v)) GIVE_UP(sc);
        sc->cur_int[f->column] = v;
        return 0;
    }
    case K_DIMS:
        if (is_null(sc)) { sc->p += 4; sc->cur_code[f->column] = -1; return 0; }
        if (scan_dims(sc)) return -1;
        return set_code(sc, f->column, s);
    case K_RAW:
        if (skip_value(sc, 1)) return -1;
        return set_code(sc, f->column, s);
    case K_ARGS:
        if (*s != '{' || sc->args_seen++) GIVE_UP(sc);  /* an explicit null is not an Args either */
        return scan_object(sc, arg_keys);
    }
    GIVE_UP(sc);
}

/* An object whose known keys (`keys`) are read into the current event. */
static int scan_object(Scan *sc, const KeySlot *keys) {
    int done = open_container(sc, '{', '}');
    while (!done) {
        const char *key = sc->p;
        if (key >= sc->end || *key != '"' || scan_string(sc)) GIVE_UP(sc);
        size_t n = sc->p - key - 2;
        if (sc->escaped) GIVE_UP(sc);  /* msgspec would match the unescaped key */
        if (key_colon(sc)) return -1;
        const Field *f = find_key(keys, key + 1, n);
        if (f ? scan_field(sc, f) : skip_value(sc, 2)) return -1;
        done = next_element(sc, '}');
    }
    return done < 0 ? -1 : 0;
}

static const char EMPTY[] = "\"\"";

static int scan_event(Scan *sc, const char *base) {
    for (int i = 0; i < N_TEXT; i++) sc->cur_code[i] = -1;
    for (int i = 0; i < N_INT; i++) sc->cur_int[i] = -1;
    for (int i = 0; i < N_FLOAT; i++) sc->cur_float[i] = NAN;
    sc->args_seen = 0;
    const char *start = sc->p;
    if (scan_object(sc, event_keys)) return -1;
    /* absent texts of type str are "" (bp's absent value is None) */
    static const int strs[] = {T_PH, T_CAT, T_NAME};
    for (int i = 0; i < 3; i++) {
        if (sc->cur_code[strs[i]] >= 0) continue;
        int32_t code = intern(&sc->text[strs[i]], EMPTY, 2);
        if (code < 0) return -1;
        sc->cur_code[strs[i]] = code;
    }
    if (sc->cur_code[T_BP] < 0) {
        int32_t code = intern(&sc->text[T_BP], "null", 4);
        if (code < 0) return -1;
        sc->cur_code[T_BP] = code;
    }
    for (int i = 0; i < N_TEXT; i++)
        if (buf_reserve(&sc->codes[i], 4)) return -1;
    for (int i = 0; i < N_INT; i++)
        if (buf_reserve(&sc->ints[i], 8)) return -1;
    for (int i = 0; i < N_FLOAT; i++)
        if (buf_reserve(&sc->floats[i], 8)) return -1;
    if (buf_reserve(&sc->spans, 16)) return -1;
    for (int i = 0; i < N_TEXT; i++)
        memcpy(sc->codes[i].data + sc->codes[i].len, &sc->cur_code[i], 4), sc->codes[i].len += 4;
    for (int i = 0; i < N_INT; i++)
        memcpy(sc->ints[i].data + sc->ints[i].len, &sc->cur_int[i], 8), sc->ints[i].len += 8;
    for (int i = 0; i < N_FLOAT; i++)
        memcpy(sc->floats[i].data + sc->floats[i].len, &sc->cur_float[i], 8), sc->floats[i].len += 8;
    int64_t span[2] = {start - base, sc->p - base};
    memcpy(sc->spans.data + sc->spans.len, span, 16), sc->spans.len += 16;
    return 0;
}

static PyObject *bufs_out(Buf *bufs, int n) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *b = PyByteArray_FromStringAndSize(bufs[i].data ? bufs[i].data : "", (Py_ssize_t)bufs[i].len);
        if (!b) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, b);
    }
    return out;
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE)) return NULL;
    Scan *sc = PyMem_Calloc(1, sizeof(Scan));
    PyObject *result = NULL;
    int count = 0, failed = 0;
    if (!sc) { PyBuffer_Release(&view); return PyErr_NoMemory(); }
    for (int i = 0; i < N_TEXT; i++)
        if (interner_init(&sc->text[i])) failed = 1;
    const char *base = view.buf;
    sc->p = base, sc->end = base + view.len;
    if (!failed) {
        int status = 0;  /* -1: gave up, or an error (an exception, or no memory where the GIL was released) */
        sc->released = PyEval_SaveThread();
        skip_ws(sc);
        int done = open_container(sc, '[', ']');
        while (!done) {
            if ((status = scan_event(sc, base))) break;
            count++;
            done = next_element(sc, ']');
        }
        skip_ws(sc);
        if (sc->p != sc->end) sc->giveup = 1;  /* msgspec refuses trailing characters */
        PyEval_RestoreThread(sc->released);
        failed = PyErr_Occurred() != NULL;
        if (!failed && status && !sc->giveup) failed = PyErr_NoMemory() == NULL;
    }
    if (!failed && !sc->giveup) {
        PyObject *values = PyList_New(N_TEXT);
        for (int i = 0; values && i < N_TEXT; i++) {
            PyObject *column = values_of(&sc->text[i], MAKERS[i]);
            if (!column) {
                Py_CLEAR(values);
                if (!PyErr_Occurred()) sc->giveup = 1;  /* a text that is not UTF-8: msgspec refuses it */
                break;
            }
            PyList_SET_ITEM(values, i, column);
        }
        PyObject *spans = PyByteArray_FromStringAndSize(sc->spans.data ? sc->spans.data : "",
                                                        (Py_ssize_t)sc->spans.len);
        PyObject *codes = bufs_out(sc->codes, N_TEXT), *ints = bufs_out(sc->ints, N_INT);
        PyObject *floats = bufs_out(sc->floats, N_FLOAT);
        if (values && spans && codes && ints && floats)
            result = Py_BuildValue("(iOOOOO)", count, codes, values, ints, floats, spans);
        Py_XDECREF(values), Py_XDECREF(spans), Py_XDECREF(codes), Py_XDECREF(ints), Py_XDECREF(floats);
    }
    if (!result && !PyErr_Occurred()) result = Py_NewRef(Py_None);  /* gave up */
    for (int i = 0; i < N_TEXT; i++) interner_free(&sc->text[i]), PyMem_RawFree(sc->codes[i].data);
    for (int i = 0; i < N_INT; i++) PyMem_RawFree(sc->ints[i].data);
    for (int i = 0; i < N_FLOAT; i++) PyMem_RawFree(sc->floats[i].data);
    PyMem_RawFree(sc->spans.data);
    PyMem_Free(sc);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(text) -> (count, codes, values, ints, floats, spans) or None: the events of a JSON array in "
     "columns, None where the text is not read the fast way (scan.py reads what each holds)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) {
    is_space[' '] = is_space['\n'] = is_space['\r'] = is_space['\t'] = 1;
    build_keys(event_keys, EVENT_FIELDS);
    build_keys(arg_keys, ARG_FIELDS);
    return PyModule_Create(&module);
}
