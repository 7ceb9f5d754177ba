// The per-thread last-error slot behind ubik_last_error, in C because it is
// thread-local storage of the calling C thread: an exported Go function runs
// on the thread that called it, so the Go side sets the slot of that thread
// (ubik__set_error) and the host reads it back on the same thread.

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ubik.h"

void ubik__set_error(int code, const char *text, size_t len);

typedef struct {
	int code;
	size_t cap;
	char *text;
} err_slot;

static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;
static int slot_key_ok;

static void slot_free(void *p) {
	err_slot *s = p;
	free(s->text);
	free(s);
}

static void slot_init(void) {
	slot_key_ok = pthread_key_create(&slot_key, slot_free) == 0;
}

static err_slot *slot_get(int create) {
	pthread_once(&slot_once, slot_init);
	if (!slot_key_ok) {
		return NULL;
	}
	err_slot *s = pthread_getspecific(slot_key);
	if (s == NULL && create) {
		s = calloc(1, sizeof *s);
		if (s == NULL) {
			return NULL;
		}
		if (pthread_setspecific(slot_key, s) != 0) {
			free(s);
			return NULL;
		}
	}
	return s;
}

// The message that stands in when the slot itself cannot be allocated.
static const char out_of_memory[] = "ubik: out of memory while recording an error";

__attribute__((visibility("hidden"))) void ubik__set_error(int code, const char *text, size_t len) {
	err_slot *s = slot_get(1);
	if (s == NULL) {
		return;
	}
	s->code = code;
	if (len + 1 > s->cap) {
		char *t = realloc(s->text, len + 1);
		if (t == NULL) {
			free(s->text);
			s->text = NULL;
			s->cap = 0;
			return;
		}
		s->text = t;
		s->cap = len + 1;
	}
	memcpy(s->text, text, len);
	s->text[len] = '\0';
}

const char *ubik_last_error(void) {
	err_slot *s = slot_get(0);
	if (s == NULL || s->code == 0) {
		return "";
	}
	if (s->text == NULL) {
		return out_of_memory;
	}
	return s->text;
}

int ubik_last_error_code(void) {
	err_slot *s = slot_get(0);
	return s == NULL ? 0 : s->code;
}

int ubik_abi_version(void) {
	return UBIK_ABI_VERSION;
}

// kept roots the strings the library hands out as static (the status-code
// names and descriptions, allocated once): Go's heap is invisible to leak
// checkers, so without a root in C they would be reported as leaks.
// volatile: the array is never read, and the stores must not be optimized away.
static char *volatile kept[64];
static size_t nkept;

__attribute__((visibility("hidden"))) int ubik__keep(char *p) {
	if (nkept == sizeof kept / sizeof kept[0]) {
		return 0;
	}
	kept[nkept++] = p;
	return 1;
}
