function run_models(binfile, model, outfile, first, count)
% run_models(BINFILE, MODEL, OUTFILE[, FIRST, COUNT])
%
% Runs one of Khattak and Mikaitis's tensor-core models (MODEL: 'H100TC', 'H200TC', 'B200TC',
% 'B200TCRN', a function of north-numerical-computing/MATLAB-tensor-core's models/, which must
% be on the path: run.sh sets it) on the FP8 inner products of BINFILE (written by
% tools/reference/tc_vectors.py gen) and appends each result's float32 bits (uint32,
% little-endian) to OUTFILE. Each inner product d = c + a * b (a 1x32, b 32x1, c 1x1) is one
% call MODEL(1, a, b, 1, c, FMT, 'fp32'), FMT 'e4m3' or 'e5m2' from the file's mantissa bits.
% FIRST (0-based, default 0) and COUNT (default: to the end) select the inner products.
% The models display a variable on every call (Generic_BFMA_TC.m:170 has no semicolon):
% run.sh sends standard output to /dev/null; progress goes to standard error.

  fid = fopen(binfile, 'r', 'ieee-le');
  if fid < 0, error('cannot open %s', binfile); end
  magic = fread(fid, 4, 'char=>char')';
  if ~strcmp(magic, 'TCV1'), error('%s: not a TCV1 file', binfile); end
  hdr = fread(fid, 2, 'uint32');
  N = hdr(1); mbits = hdr(2);
  table = fread(fid, 256, 'double');
  A = fread(fid, [32, N], 'uint8=>uint8');
  B = fread(fid, [32, N], 'uint8=>uint8');
  C = fread(fid, N, 'uint32=>uint32');
  fclose(fid);
  if mbits == 3, fmt = 'e4m3'; else, fmt = 'e5m2'; end
  if nargin < 4, first = 0; end
  if nargin < 5, count = N - first; end
  last = min(N, first + count);

  fout = fopen(outfile, 'a', 'ieee-le');
  model_fn = str2func(model);
  block = 1000;
  out = zeros(1, block, 'uint32');
  nb = 0;
  t0 = tic;
  for n = first + 1 : last
    a = table(double(A(:, n)) + 1)';     % 1 x 32
    b = table(double(B(:, n)) + 1);      % 32 x 1
    c = double(typecast(C(n), 'single'));
    d = model_fn(1, a, b, 1, c, fmt, 'fp32');
    nb = nb + 1;
    out(nb) = typecast(single(d), 'uint32');
    if nb == block || n == last
      fwrite(fout, out(1:nb), 'uint32');
      fflush(fout);
      nb = 0;
      fprintf(stderr, '%s %s: %d of %d done, %.1f s\n', model, fmt, n - first, ...
              last - first, toc(t0));
      fflush(stderr);
    end
  end
  fclose(fout);
end
