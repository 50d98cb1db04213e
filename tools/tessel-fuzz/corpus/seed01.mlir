func.func @grid() -> (i32, i32) {
  %0 = tile.program_id 2 : i32
  %1 = tile.num_programs 0 : i32
  return %0, %1 : i32, i32
}
