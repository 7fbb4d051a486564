/* SPDX-License-Identifier: MIT */
/*
 * JSON output of the command-line tools (json-glib): one call per member
 * instead of a name call and a value call, and the text of a finished
 * builder.  Kept out of libvrdma so that its users need no json-glib.
 */
#ifndef VRDMA_JSON_OUT_H
#define VRDMA_JSON_OUT_H

#include <json-glib/json-glib.h>

void json_out_str(JsonBuilder *b, const char *name, const char *value);
void json_out_int(JsonBuilder *b, const char *name, gint64 value);
void json_out_bool(JsonBuilder *b, const char *name, gboolean value);
void json_out_double(JsonBuilder *b, const char *name, double value);

/* The text of what b has built (its root, closed); the caller g_free()s it. */
char *json_out_text(JsonBuilder *b, gboolean pretty);

#endif
