/* The call path of every in-process program (codegen/fastcall.py builds this once per
 * Python and numpy version; codegen/api.py uses it).
 *
 * A program's call plan is built once: for each operand, the numpy dtype, the shape
 * (and whether the shape without a leading batch 1 is accepted), the order of its
 * dimensions in memory (row-major: 0, 1, ...; col-major: reversed; any dense
 * permutation a layout is), and for each output whether a fresh one is zeroed (the
 * program accumulates into it) or left empty. A call then costs a few struct reads per
 * array: exact ndarray, the plan's dtype, the shape, strides that lay it out densely in
 * that order (C-contiguous for row-major; a transposed view such as `k.T` for col-major),
 * aligned (to its element), writeable for outputs; the data pointers go
 * to the program's `kernel_call(void **)` with the GIL released. An output the call
 * allocates starts on a 64-byte line (new_output), so that no vector store of it splits a
 * line; inputs are the caller's and read where they lie. Whatever fails a test
 * (another dtype or shape, a strided view, a torch tensor, an input overlapping an
 * output) returns NotImplemented, and the Python path (codegen/api.py) converts, copies
 * where it must, or says what is wrong. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_OPS 32
#define MAX_DIMS 16
#define ALIGN 64 /* codegen/convert.py's ALIGN: a cache line, one AVX-512 vector */

typedef struct {
    int index;                /* position in the program's parameter list */
    PyArray_Descr *dtype;     /* a reference held by the plan */
    int ndim;
    npy_intp dims[MAX_DIMS];
    npy_intp bdims[MAX_DIMS]; /* the array the operand is a region of (codegen/views.py); dims if its own */
    int order[MAX_DIMS];      /* dimensions from the outermost in memory to the innermost */
    int squeezable;           /* dims[0] == 1: an array of dims[1:] is accepted too */
    int zero;                 /* an output the program reads: a fresh one is zeroed */
    npy_intp itemsize;        /* one element's bytes */
    npy_intp nbytes;          /* the whole array's bytes (of bdims) */
} OperandPlan;

typedef struct {
    int (*fn)(void **);
    int nin, nout, nops;
    OperandPlan in[MAX_OPS], out[MAX_OPS];
} CallPlan;

static const char *CAPSULE = "morello_asp.call_plan";

static void plan_free(PyObject *capsule) {
    CallPlan *p = (CallPlan *)PyCapsule_GetPointer(capsule, CAPSULE);
    if (!p) return;
    for (int i = 0; i < p->nin; i++) Py_XDECREF(p->in[i].dtype);
    for (int i = 0; i < p->nout; i++) Py_XDECREF(p->out[i].dtype);
    PyMem_Free(p);
}

/* (index, dtype, shape, zero, order[, buffer shape]) -> OperandPlan; 0 on success, -1
 * with an exception set. The buffer shape (the array an operand is a region of) strides
 * the operand's dimensions; without it the operand is its own array. */
static int read_operand(PyObject *t, OperandPlan *op) {
    PyObject *dtype, *shape, *order, *bshape = NULL;
    int zero;
    if (!PyArg_ParseTuple(t, "iOO!pO!|O!", &op->index, &dtype, &PyTuple_Type, &shape, &zero, &PyTuple_Type, &order,
                          &PyTuple_Type, &bshape))
        return -1;
    if (!bshape) bshape = shape;
    if (!PyArray_DescrConverter(dtype, &op->dtype)) return -1; /* a new reference */
    op->ndim = (int)PyTuple_GET_SIZE(shape);
    if (op->ndim > MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError, "too many dimensions for the call plan");
        return -1;
    }
    /* the item size as Python reads it: PyArray_Descr's fields differ in numpy 1 and 2 */
    PyObject *size = PyObject_GetAttrString((PyObject *)op->dtype, "itemsize");
    if (!size) return -1;
    op->nbytes = PyLong_AsSsize_t(size);
    Py_DECREF(size);
    if (op->nbytes < 0) return -1;
    op->itemsize = op->nbytes;
    if (PyTuple_GET_SIZE(bshape) != op->ndim) {
        PyErr_SetString(PyExc_ValueError, "the call plan's buffer shape has another rank than its operand");
        return -1;
    }
    for (int d = 0; d < op->ndim; d++) {
        op->dims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        op->bdims[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(bshape, d));
        if (op->dims[d] < 0 || op->bdims[d] < op->dims[d]) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "a negative dimension, or one beyond its buffer, in the call plan");
            return -1;
        }
        if (op->bdims[d] && op->nbytes > NPY_MAX_INTP / 2 / op->bdims[d]) {
            PyErr_SetString(PyExc_ValueError, "an operand too large for the call plan");
            return -1;
        }
        op->nbytes *= op->bdims[d];
    }
    if (PyTuple_GET_SIZE(order) != op->ndim) {
        PyErr_SetString(PyExc_ValueError, "the call plan's order is not a permutation of its dimensions");
        return -1;
    }
    int seen = 0;
    for (int j = 0; j < op->ndim; j++) {
        long d = PyLong_AsLong(PyTuple_GET_ITEM(order, j));
        if (d < 0 || d >= op->ndim || (seen >> d) & 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "the call plan's order is not a permutation of its dimensions");
            return -1;
        }
        seen |= 1 << d;
        op->order[j] = (int)d;
    }
    op->squeezable = op->ndim >= 2 && op->dims[0] == 1;
    op->zero = zero;
    return 0;
}

/* plan(function address, number of operands, inputs, outputs) -> capsule */
static PyObject *plan(PyObject *self, PyObject *args) {
    unsigned long long addr;
    int nops;
    PyObject *ins, *outs;
    if (!PyArg_ParseTuple(args, "KiO!O!", &addr, &nops, &PyTuple_Type, &ins, &PyTuple_Type, &outs)) return NULL;
    if (nops > MAX_OPS || PyTuple_GET_SIZE(ins) + PyTuple_GET_SIZE(outs) != nops) {
        PyErr_SetString(PyExc_ValueError, "bad operand count for the call plan");
        return NULL;
    }
    CallPlan *p = PyMem_Calloc(1, sizeof *p);
    if (!p) return PyErr_NoMemory();
    p->fn = (int (*)(void **))(uintptr_t)addr;
    p->nops = nops;
    PyObject *capsule = PyCapsule_New(p, CAPSULE, plan_free);
    if (!capsule) {
        PyMem_Free(p);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ins); i++, p->nin++)
        if (read_operand(PyTuple_GET_ITEM(ins, i), &p->in[i]) < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(outs); i++, p->nout++)
        if (read_operand(PyTuple_GET_ITEM(outs, i), &p->out[i]) < 0) goto fail;
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* The byte strides of an array of op's buffer shape laid out densely in op's order. */
static void dense_strides(const OperandPlan *op, npy_intp *strides) {
    npy_intp step = op->itemsize;
    for (int j = op->ndim - 1; j >= 0; j--) {
        strides[op->order[j]] = step;
        step *= op->bdims[op->order[j]];
    }
}

/* 1 if `o` is an ndarray the program can read (or, writeable, write) as it lies: the
 * plan's dtype, aligned, its shape (2 with the leading batch 1 dropped), and strides
 * that are the dense ones of the plan's order over its buffer shape (a dimension of
 * length 1 has any). */
static int fits(PyObject *o, const OperandPlan *op, int writeable) {
    if (!PyArray_CheckExact(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    PyArray_Descr *d = PyArray_DESCR(a);
    if (d != op->dtype && !PyArray_EquivTypes(d, op->dtype)) return 0;
    int want = NPY_ARRAY_ALIGNED | (writeable ? NPY_ARRAY_WRITEABLE : 0);
    if ((PyArray_FLAGS(a) & want) != want) return 0;
    int nd = PyArray_NDIM(a), skip;
    const npy_intp *dims = PyArray_DIMS(a), *strides = PyArray_STRIDES(a);
    if (nd == op->ndim)
        skip = 0;
    else if (op->squeezable && nd == op->ndim - 1)
        skip = 1; /* the array's dimension d is the plan's d + 1 */
    else
        return 0;
    for (int k = 0; k < nd; k++)
        if (dims[k] != op->dims[k + skip]) return 0;
    npy_intp step = PyArray_ITEMSIZE(a);
    for (int j = op->ndim - 1; j >= 0; j--) {
        int d = op->order[j], k = d - skip;
        /* the dropped batch 1, and any length-1 dimension, may have any stride */
        if (k >= 0 && dims[k] != 1 && strides[k] != step) return 0;
        step *= op->bdims[d];
    }
    return 1 + skip;
}

/* A fresh output of op's shape (without its leading 1 if `drop`), dense in op's order
 * (C-contiguous for row-major; a region: the corner of a new array of its buffer shape) and writeable, its data on an ALIGN-byte boundary (numpy's allocator puts large arrays 16
 * or 48 bytes past one): a view at the first boundary inside a uint8 array of
 * nbytes + ALIGN - 1, zeroed if the program accumulates into it (calloc, as np.zeros),
 * which is the view's base and is freed with it. A new reference, or NULL with an
 * exception set. */
static PyObject *new_output(const OperandPlan *op, int drop) {
    npy_intp rawlen = op->nbytes + ALIGN - 1;
    PyObject *raw = op->zero ? PyArray_ZEROS(1, &rawlen, NPY_UINT8, 0) : PyArray_EMPTY(1, &rawlen, NPY_UINT8, 0);
    if (!raw) return NULL;
    char *data = PyArray_BYTES((PyArrayObject *)raw);
    data += (ALIGN - (uintptr_t)data % ALIGN) % ALIGN;
    npy_intp strides[MAX_DIMS];
    dense_strides(op, strides);
    Py_INCREF(op->dtype); /* PyArray_NewFromDescr steals it, on failure too */
    PyObject *r = PyArray_NewFromDescr(&PyArray_Type, op->dtype, op->ndim - drop, op->dims + drop, strides + drop,
                                       data, NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE, NULL);
    if (!r) {
        Py_DECREF(raw);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)r, raw) < 0) { /* steals raw, on failure too */
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

/* run(plan, inputs tuple, out) -> the output(s), out itself, or NotImplemented */
static PyObject *run(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 3 || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "run(plan, inputs, out)");
        return NULL;
    }
    const CallPlan *p = (const CallPlan *)PyCapsule_GetPointer(argv[0], CAPSULE);
    if (!p) return NULL;
    PyObject *args = argv[1], *out = argv[2];
    if (PyTuple_GET_SIZE(args) != p->nin) Py_RETURN_NOTIMPLEMENTED;
    void *ptrs[MAX_OPS];
    int squeeze = 0;
    for (int i = 0; i < p->nin; i++) {
        PyObject *o = PyTuple_GET_ITEM(args, i);
        int f = fits(o, &p->in[i], 0);
        if (!f) Py_RETURN_NOTIMPLEMENTED;
        squeeze |= f == 2;
        ptrs[p->in[i].index] = PyArray_DATA((PyArrayObject *)o);
    }
    PyObject *result;
    if (out == Py_None) {
        result = p->nout == 1 ? NULL : PyTuple_New(p->nout);
        if (p->nout != 1 && !result) return NULL;
        for (int k = 0; k < p->nout; k++) {
            const OperandPlan *op = &p->out[k];
            int drop = squeeze && op->squeezable;
            PyObject *r = new_output(op, drop);
            if (!r) {
                Py_XDECREF(result);
                return NULL;
            }
            ptrs[op->index] = PyArray_DATA((PyArrayObject *)r);
            if (p->nout == 1)
                result = r;
            else
                PyTuple_SET_ITEM(result, k, r);
        }
    } else {
        if (p->nout == 1) {
            if (!fits(out, &p->out[0], 1)) Py_RETURN_NOTIMPLEMENTED;
            ptrs[p->out[0].index] = PyArray_DATA((PyArrayObject *)out);
        } else {
            if (!PyTuple_CheckExact(out) || PyTuple_GET_SIZE(out) != p->nout) Py_RETURN_NOTIMPLEMENTED;
            for (int k = 0; k < p->nout; k++) {
                PyObject *o = PyTuple_GET_ITEM(out, k);
                if (!fits(o, &p->out[k], 1)) Py_RETURN_NOTIMPLEMENTED;
                ptrs[p->out[k].index] = PyArray_DATA((PyArrayObject *)o);
            }
        }
        Py_INCREF(out);
        result = out;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = p->fn(ptrs);
    Py_END_ALLOW_THREADS
    if (rc != 0) { /* operands overlap: nothing ran; the Python path copies */
        Py_DECREF(result);
        Py_RETURN_NOTIMPLEMENTED;
    }
    return result;
}

/* A chain: programs called one after another on fixed buffers (a session's steps,
 * morello_asp/onnx/session.py), each entry a program's kernel_call and its operands' data
 * pointers, read once when the chain is made. A run calls them in order with the GIL
 * released and nothing of Python between; an entry whose program refuses (its operands
 * overlap: nothing of it ran) stops the run, and the caller runs that step its own way. */
static const char *CHAIN = "morello_asp.call_chain";

typedef struct {
    int (*fn)(void **);
    void *ptrs[MAX_OPS];
} ChainEntry;

typedef struct {
    Py_ssize_t n;
    ChainEntry e[];
} Chain;

static void chain_free(PyObject *capsule) {
    void *c = PyCapsule_GetPointer(capsule, CHAIN);
    if (c) PyMem_Free(c);
}

/* chain([(address, (pointer, ...)), ...]) -> capsule */
static PyObject *chain(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "chain([(address, (pointer, ...)), ...])");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Chain *c = (Chain *)PyMem_Malloc(sizeof(Chain) + (size_t)n * sizeof(ChainEntry));
    if (!c) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    c->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *ptrs;
        unsigned long long addr;
        if (!PyArg_ParseTuple(item, "KO!", &addr, &PyTuple_Type, &ptrs)) goto fail;
        Py_ssize_t k = PyTuple_GET_SIZE(ptrs);
        if (k > MAX_OPS) {
            PyErr_SetString(PyExc_ValueError, "chain: more operands than a program has");
            goto fail;
        }
        c->e[i].fn = (int (*)(void **))(uintptr_t)addr;
        for (Py_ssize_t j = 0; j < k; j++) {
            c->e[i].ptrs[j] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(ptrs, j));
            if (PyErr_Occurred()) goto fail;
        }
    }
    Py_DECREF(seq);
    PyObject *cap = PyCapsule_New(c, CHAIN, chain_free);
    if (!cap) PyMem_Free(c);
    return cap;
fail:
    Py_DECREF(seq);
    PyMem_Free(c);
    return NULL;
}

/* run_chain(chain, start) -> -1 when every entry from `start` on ran, else the index of
 * the entry that refused (nothing of it ran; those before it did) */
static PyObject *run_chain(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
    if (argc != 2) {
        PyErr_SetString(PyExc_TypeError, "run_chain(chain, start)");
        return NULL;
    }
    const Chain *c = (const Chain *)PyCapsule_GetPointer(argv[0], CHAIN);
    if (!c) return NULL;
    Py_ssize_t i = PyLong_AsSsize_t(argv[1]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < c->n; i++)
        if (c->e[i].fn((void **)c->e[i].ptrs) != 0) break;
    Py_END_ALLOW_THREADS
    return PyLong_FromSsize_t(i < c->n ? i : -1);
}

static PyMethodDef METHODS[] = {
    {"plan", plan, METH_VARARGS, "plan(address, nops, inputs, outputs): a call plan for kernel_call at address"},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL, "run(plan, inputs, out)"},
    {"chain", chain, METH_O, "chain([(address, pointers), ...]): programs called one after another on fixed buffers"},
    {"run_chain", (PyCFunction)(void (*)(void))run_chain, METH_FASTCALL, "run_chain(chain, start) -> -1, or the entry that refused"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "MODNAME", NULL, -1, METHODS};

PyMODINIT_FUNC PyInit_MODNAME(void) {
    import_array();
    return PyModule_Create(&MODULE);
}
