function tf = ismember(a, s)
% Speed shim for run.sh (put before Octave's own ismember on the path when TC_SHIM=1): the
% models call ismember(char, cell of char) 11 times per inner product (H100TC.m, B200TC.m,
% GEMM.m), which Octave's general ismember makes about half of the run time. Same answer for
% that form; any other form is an error here (the models use no other).
  if ischar(a) && iscellstr(s) && nargin == 2 && nargout <= 1
    tf = any(strcmp(a, s));
  else
    error('tools/reference/octave/shim/ismember.m: only ismember(char, cellstr)');
  end
end
