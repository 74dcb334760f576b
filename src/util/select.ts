/**
 * Selection in a Float64Array: Floyd and Rivest's SELECT (CACM 18(3), 1975), as the `quickselect`
 * package writes it, specialised to a Float64Array compared with `<` and `>`. The package's one
 * generic function (rbush calls it on arrays of objects) ends up comparing boxed numbers through a
 * callback: over the Active listings at 100k, Q5's two percentiles allocated 442 KB of heap numbers
 * a run with it, none with this (DESIGN.md, "Aggregation").
 */

/**
 * Rearranges values[left, right] so that values[k] is the value a sort would put there, with none
 * greater before it and none smaller after it. The values must not be NaN.
 */
export function selectFloat64(values: Float64Array, k: number, left: number, right: number): void {
  while (right > left) {
    if (right - left > 600) {
      // recurse on a sample small enough to find a pivot close to the k-th value
      const n = right - left + 1;
      const m = k - left + 1;
      const z = Math.log(n);
      const s = 0.5 * Math.exp((2 * z) / 3);
      const sd = 0.5 * Math.sqrt((z * s * (n - s)) / n) * (m - n / 2 < 0 ? -1 : 1);
      selectFloat64(values, k, Math.max(left, Math.floor(k - (m * s) / n + sd)), Math.min(right, Math.floor(k + ((n - m) * s) / n + sd)));
    }
    const t = values[k];
    let i = left;
    let j = right;
    swap(values, left, k);
    if (values[right] > t) swap(values, left, right);
    while (i < j) {
      swap(values, i, j);
      i++;
      j--;
      while (values[i] < t) i++;
      while (values[j] > t) j--;
    }
    if (values[left] === t) swap(values, left, j);
    else {
      j++;
      swap(values, j, right);
    }
    if (j <= k) left = j + 1;
    if (k <= j) right = j - 1;
  }
}

function swap(values: Float64Array, i: number, j: number): void {
  const v = values[i];
  values[i] = values[j];
  values[j] = v;
}
