// SPDX-License-Identifier: MIT
#include "json-out.h"

void json_out_str(JsonBuilder *b, const char *name, const char *value)
{
	json_builder_set_member_name(b, name);
	json_builder_add_string_value(b, value);
}

void json_out_int(JsonBuilder *b, const char *name, gint64 value)
{
	json_builder_set_member_name(b, name);
	json_builder_add_int_value(b, value);
}

void json_out_bool(JsonBuilder *b, const char *name, gboolean value)
{
	json_builder_set_member_name(b, name);
	json_builder_add_boolean_value(b, value);
}

void json_out_double(JsonBuilder *b, const char *name, double value)
{
	json_builder_set_member_name(b, name);
	json_builder_add_double_value(b, value);
}

char *json_out_text(JsonBuilder *b, gboolean pretty)
{
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) root = json_builder_get_root(b);

	json_generator_set_root(gen, root);
	json_generator_set_pretty(gen, pretty);
	return json_generator_to_data(gen, NULL);
}
