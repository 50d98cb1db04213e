func.func @grid_ids(%out: !tile.ptr<i32>) {
  %c1 = arith.constant 1 : i32
  %c6 = arith.constant 6 : i32
  %c10 = arith.constant 10 : i32
  %x = tile.program_id 0 : i32
  %y = tile.program_id 1 : i32
  %nx = tile.num_programs 0 : i32
  %row = arith.muli %y, %nx : i32
  %at = arith.addi %row, %x : i32
  %ty = arith.muli %y, %c10 : i32
  %v = arith.addi %ty, %x : i32
  %d = tile.make_desc %out, shape [%c6], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %t = tile.splat %v : i32 -> tensor<1xi32>
  tile.store %d[%at], %t : !tile.desc<1, i32>, tensor<1xi32>
  return
}
