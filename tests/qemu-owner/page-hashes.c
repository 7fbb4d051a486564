// SPDX-License-Identifier: MIT
/*
 * page-hashes FILE OUT: writes the little-endian XXH3-64 of every 4 KiB
 * page of FILE to OUT, in page order: the hash file format that
 * `vrdma-guestsim --role dest --check-hash-file` compares its image with.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

int main(int argc, char **argv)
{
	static unsigned char page[4096];
	FILE *in, *out;
	size_t n;

	if (argc != 3) {
		fprintf(stderr, "usage: page-hashes FILE OUT\n");
		return 2;
	}
	in = fopen(argv[1], "rb");
	out = fopen(argv[2], "wb");
	if (!in || !out) {
		perror("page-hashes");
		return 1;
	}
	while ((n = fread(page, 1, sizeof(page), in)) == sizeof(page)) {
		uint64_t h = XXH3_64bits(page, sizeof(page));
		unsigned char le[8];

		for (int i = 0; i < 8; i++)
			le[i] = (unsigned char)(h >> (8 * i));
		fwrite(le, 1, 8, out);
	}
	if (n || ferror(in) || fclose(out)) {
		fprintf(stderr, "page-hashes: %s: partial page or I/O error\n", argv[1]);
		return 1;
	}
	return 0;
}
