// Package lzo implements the LZO1X-1 compressor and a safe LZO1X
// decompressor without cgo: pure Go, with the compressor's block encoder
// also in amd64 assembly (lzo_amd64.s; -tags purego leaves it out).
//
// makedumpfile's -l option stores each page of a kdump-compressed dump as
// a raw LZO1X stream made by liblzo2's lzo1x_1_compress, with no header,
// length or checksum; readers such as crash and libkdumpfile decode it with
// lzo1x_decompress_safe. This package produces and reads that stream
// without cgo.
//
// # Stream format
//
// An LZO1X stream is a sequence of instructions. Each instruction is
// either a run of literal bytes or a copy of earlier output (a match, given
// as a length and a distance back from the current output position). The
// top bits of an instruction byte select its kind:
//
//	0000LLLL  after a match: a run of 3+L literals (L == 0: long run)
//	0000DDSS  after 1-3 literals: copy 2 bytes, distance 1..1024
//	0000DDSS  after a literal run of 4 or more: copy 3 bytes, distance 2049..3072
//	0001HLLL  copy 2+L bytes, distance 16384..49151 (H: bit 14 of the distance);
//	          the distance 16384 marks the end of the stream
//	001LLLLL  copy 2+L bytes, distance 1..16384
//	01LDDDSS  copy 3..4 bytes, distance 1..2048 (one more distance byte follows)
//	1LLDDDSS  copy 5..8 bytes, distance 1..2048 (one more distance byte follows)
//
// A length field that is zero is continued in the following bytes: each
// zero byte adds 255 and the first non-zero byte ends it. The 001 and 0001
// forms are followed by a little-endian 16-bit word holding 14 distance
// bits and two bits SS. SS (0..3) is the number of literals that follow a
// match directly, without an instruction of their own; it also decides how
// the next 0000xxxx byte is read, as shown above. The first byte of a
// stream may instead be 17+n (n = 0..238) for an opening run of n
// literals. Every stream ends with the three bytes 0x11 0x00 0x00.
//
// # The encoder
//
// [Compressor.Compress] follows the algorithm of liblzo2's
// lzo1x_1_compress, not just its format: it hashes every probed 4-byte
// sequence into a 14-bit dictionary of recent positions, takes the first
// candidate that really matches and extends it greedily, probes more
// sparsely the longer a literal run grows, cuts long inputs into
// 49152-byte blocks so that every distance fits the format, and leaves
// inputs under 32 bytes as literals. Its streams therefore come out the
// same as liblzo2 2.10's, byte for byte (the lzo2-tagged tests check this
// against the C library), which keeps dumps written by pagepipe -l
// comparable with makedumpfile's in size and content, and it never relies
// on features some decoders lack.
//
// [Decompress] accepts any LZO1X stream, including instruction forms that
// LZO1X-1 itself never emits, and checks every read and write, so hostile
// input yields an error, never a panic or a write outside dst.
package lzo
