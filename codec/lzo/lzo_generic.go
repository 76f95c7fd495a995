//go:build !amd64 || purego

package lzo

// compressBlockFast is compressBlock: only amd64 has an assembly version
// (lzo_amd64.go).
func (c *Compressor) compressBlockFast(dst []byte, op int, src []byte, start, end, carry int) (int, int) {
	return c.compressBlock(dst, op, src, start, end, carry)
}
