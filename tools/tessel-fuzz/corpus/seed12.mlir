func.func @div(%x: i32) {
  %c7 = arith.constant 7 : i32
  %d = arith.divsi %c7, %x : i32
  return
}
