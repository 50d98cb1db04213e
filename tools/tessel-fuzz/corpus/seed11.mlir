func.func @unsupported(%x: f32) {
  %s = math.sin %x : f32
  return
}
