#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

/* The reference implementation refuses headers above 100 MB; so do we. */
#define MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)

static const struct {
  const char *name;
  size_t size;
} dtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2},
              {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},     {"U32", 4},     {"F32", 4},
              {"F64", 8},  {"I64", 8}, {"U64", 8}};

void precis_safetensors_close(precis_safetensors *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
  free(st->tensors);
  free(st->path);
  memset(st, 0, sizeof *st);
}

static int by_begin(const void *x, const void *y) {
  const precis_st_tensor *a = x, *b = y;
  if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
  return a->end < b->end ? -1 : a->end > b->end;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool json_uint(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v)) return false;
  *out = (uint64_t)v;
  return true;
}

static precis_status parse_entry(const char *path, const cJSON *entry, uint64_t data_size, precis_st_tensor *t) {
  const char *name = entry->string;
  if (!cJSON_IsObject(entry)) return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": expected a JSON object", path, name);
  for (const cJSON *field = entry->child; field; field = field->next)
    if (strcmp(field->string, "dtype") && strcmp(field->string, "shape") && strcmp(field->string, "data_offsets"))
      return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": unknown field \"%s\" (expected dtype, shape, data_offsets)",
                         path, name, field->string);
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
  const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
  if (!cJSON_IsString(dtype)) return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": dtype: expected a string", path, name);
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, dtype->valuestring) == 0) {
      snprintf(t->dtype, sizeof t->dtype, "%s", dtypes[i].name);
      t->elem_size = dtypes[i].size;
    }
  if (!t->elem_size)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": unknown dtype \"%s\"", path, name, dtype->valuestring);
  if (!cJSON_IsArray(shape)) return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": shape: expected a list of integers", path, name);
  int rank = cJSON_GetArraySize(shape);
  if (rank > PRECIS_SAFETENSORS_MAX_RANK)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": rank %d is above %d", path, name, rank, PRECIS_SAFETENSORS_MAX_RANK);
  t->rank = rank;
  uint64_t elements = 1;
  for (int i = 0; i < rank; i++) {
    uint64_t d;
    if (!json_uint(cJSON_GetArrayItem(shape, i), &d))
      return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": shape[%d]: expected a non-negative integer", path, name, i);
    t->shape[i] = (int64_t)d;
    if (__builtin_mul_overflow(elements, d, &elements))
      return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": the shape's product overflows 64 bits", path, name);
  }
  uint64_t bytes;
  if (__builtin_mul_overflow(elements, (uint64_t)t->elem_size, &bytes))
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": its byte size overflows 64 bits", path, name);
  if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 || !json_uint(cJSON_GetArrayItem(offsets, 0), &t->begin) ||
      !json_uint(cJSON_GetArrayItem(offsets, 1), &t->end))
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": data_offsets: expected [begin, end] (non-negative integers)", path, name);
  if (t->begin > t->end)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                       path, name, t->begin, t->end);
  if (t->end > data_size)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: tensor \"%s\": data_offsets end at %" PRIu64 ", past the end of the data (%" PRIu64 " bytes)",
                       path, name, t->end, data_size);
  if (t->end - t->begin != bytes)
    return precis_fail(PRECIS_E_INPUT,
                       "%s: tensor \"%s\": data_offsets span %" PRIu64 " bytes, but a %s tensor of this shape needs %" PRIu64,
                       path, name, t->end - t->begin, t->dtype, bytes);
  t->name = precis_strdup(name);
  return t->name ? PRECIS_OK : precis_fail(PRECIS_E_NOMEM, "out of memory");
}

precis_status precis_safetensors_open(const char *path, precis_safetensors *out) {
  memset(out, 0, sizeof *out);
  precis_status st = PRECIS_OK;
  char *header = NULL;
  cJSON *json = NULL;
  FILE *fp = fopen(path, "rb");
  if (!fp) return precis_fail(PRECIS_E_INPUT, "%s: cannot open: %s", path, strerror(errno));
  out->path = precis_strdup(path);
  if (fseeko(fp, 0, SEEK_END) != 0) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot seek: %s", path, strerror(errno));
    goto done;
  }
  off_t size = ftello(fp);
  out->file_size = size > 0 ? (uint64_t)size : 0;
  uint8_t len_le[8];
  if (out->file_size < 8 || fseeko(fp, 0, SEEK_SET) != 0 || fread(len_le, 1, 8, fp) != 8) {
    st = precis_fail(PRECIS_E_INPUT, "%s: too short for a safetensors file (expected an 8-byte header length)", path);
    goto done;
  }
  uint64_t header_len = 0;
  for (int i = 0; i < 8; i++) header_len |= (uint64_t)len_le[i] << (8 * i);
  if (header_len > MAX_HEADER_BYTES || header_len > out->file_size - 8) {
    st = precis_fail(PRECIS_E_INPUT, "%s: header length %" PRIu64 " is larger than the file (%" PRIu64 " bytes) or above 100 MB",
                     path, header_len, out->file_size);
    goto done;
  }
  header = malloc(header_len + 1);
  if (!header) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  if (fread(header, 1, header_len, fp) != header_len) {
    st = precis_fail(PRECIS_E_IO, "%s: cannot read the header", path);
    goto done;
  }
  header[header_len] = '\0';
  if (header_len == 0 || header[0] != '{') {
    st = precis_fail(PRECIS_E_INPUT, "%s: the header is not a JSON object", path);
    goto done;
  }
  json = cJSON_ParseWithLength(header, header_len);
  if (!json || !cJSON_IsObject(json)) {
    st = precis_fail(PRECIS_E_INPUT, "%s: the header is not valid JSON", path);
    goto done;
  }
  out->data_start = 8 + header_len;
  uint64_t data_size = out->file_size - out->data_start;
  size_t count = 0;
  for (const cJSON *e = json->child; e; e = e->next) count += strcmp(e->string, "__metadata__") != 0;
  out->tensors = calloc(count ? count : 1, sizeof *out->tensors);
  if (!out->tensors) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  for (const cJSON *e = json->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) {
      if (!cJSON_IsObject(e)) {
        st = precis_fail(PRECIS_E_INPUT, "%s: __metadata__: expected a JSON object of strings", path);
        goto done;
      }
      continue;
    }
    for (size_t i = 0; i < out->n_tensors; i++)
      if (strcmp(out->tensors[i].name, e->string) == 0) {
        st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\" is listed twice", path, e->string);
        goto done;
      }
    precis_st_tensor *t = &out->tensors[out->n_tensors];
    if ((st = parse_entry(path, e, data_size, t)) != PRECIS_OK) goto done;
    out->n_tensors++;
  }
  /* Sorted by offset, the tensors must tile the data area exactly. */
  precis_st_tensor *sorted = malloc((out->n_tensors ? out->n_tensors : 1) * sizeof *sorted);
  if (!sorted) {
    st = precis_fail(PRECIS_E_NOMEM, "out of memory");
    goto done;
  }
  memcpy(sorted, out->tensors, out->n_tensors * sizeof *sorted);
  qsort(sorted, out->n_tensors, sizeof *sorted, by_begin);
  uint64_t expected = 0;
  for (size_t i = 0; i < out->n_tensors && st == PRECIS_OK; i++) {
    if (sorted[i].begin < expected)
      st = precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\" overlaps tensor \"%s\" (data_offsets begin at %" PRIu64 ")", path,
                       sorted[i].name, sorted[i - 1].name, sorted[i].begin);
    else if (sorted[i].begin > expected)
      st = precis_fail(PRECIS_E_INPUT, "%s: %" PRIu64 " unindexed bytes before tensor \"%s\" (the data must have no holes)",
                       path, sorted[i].begin - expected, sorted[i].name);
    expected = sorted[i].end;
  }
  if (st == PRECIS_OK && expected != data_size)
    st = precis_fail(PRECIS_E_INPUT, "%s: %" PRIu64 " bytes after the last tensor are not indexed (the data must have no holes)",
                     path, data_size - expected);
  free(sorted);
done:
  cJSON_Delete(json);
  free(header);
  fclose(fp);
  if (st != PRECIS_OK) precis_safetensors_close(out);
  return st;
}

const precis_st_tensor *precis_safetensors_find(const precis_safetensors *st, const char *name) {
  for (size_t i = 0; i < st->n_tensors; i++)
    if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
  return NULL;
}

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13); /* inf, NaN */
  else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
  else if (mant == 0) bits = sign;
  else { /* subnormal: normalize */
    int shift = 0;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      shift++;
    }
    bits = sign | ((uint32_t)(113 - shift) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

precis_status precis_safetensors_read_f32(const precis_safetensors *st, const precis_st_tensor *t, float **out) {
  *out = NULL;
  bool f32 = strcmp(t->dtype, "F32") == 0, f16 = strcmp(t->dtype, "F16") == 0, bf16 = strcmp(t->dtype, "BF16") == 0;
  if (!f32 && !f16 && !bf16)
    return precis_fail(PRECIS_E_INPUT, "%s: tensor \"%s\": dtype %s is not supported (expected F32, F16 or BF16)", st->path,
                       t->name, t->dtype);
  uint64_t bytes = t->end - t->begin, count = bytes / t->elem_size;
  uint8_t *raw = malloc(bytes ? bytes : 1);
  float *values = malloc(count ? count * sizeof(float) : 1);
  precis_status status = PRECIS_OK;
  FILE *fp = NULL;
  if (!raw || !values) {
    status = precis_fail(PRECIS_E_NOMEM, "%s: tensor \"%s\": out of memory (%" PRIu64 " bytes)", st->path, t->name, bytes);
    goto done;
  }
  fp = fopen(st->path, "rb");
  if (!fp || fseeko(fp, (off_t)(st->data_start + t->begin), SEEK_SET) != 0 || fread(raw, 1, bytes, fp) != bytes) {
    status = precis_fail(PRECIS_E_IO, "%s: tensor \"%s\": cannot read %" PRIu64 " bytes", st->path, t->name, bytes);
    goto done;
  }
  for (uint64_t i = 0; i < count; i++) {
    if (f32) {
      uint32_t bits = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 | (uint32_t)raw[4 * i + 2] << 16 |
                      (uint32_t)raw[4 * i + 3] << 24;
      memcpy(&values[i], &bits, 4);
    } else {
      uint16_t h = (uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
      if (f16) values[i] = half_to_float(h);
      else {
        uint32_t bits = (uint32_t)h << 16;
        memcpy(&values[i], &bits, 4);
      }
    }
  }
done:
  if (fp) fclose(fp);
  free(raw);
  if (status != PRECIS_OK) {
    free(values);
    return status;
  }
  *out = values;
  return PRECIS_OK;
}
