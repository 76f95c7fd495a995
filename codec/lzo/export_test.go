package lzo

// CompressGo is Compress with the pure-Go block encoder, whatever the
// architecture: the reference the assembly is checked against.
func (c *Compressor) CompressGo(dst, src []byte) []byte {
	return c.compress(dst, src, (*Compressor).compressBlock)
}
