/* Symbol visibility of the public API. The library is compiled with hidden visibility; only
 * what carries CACHESTORE_EXPORT is exported from libcachestore.so. C99 and C++. */
#ifndef CACHESTORE_EXPORT_H_
#define CACHESTORE_EXPORT_H_

#if defined(_WIN32)
#  if defined(CACHESTORE_SHARED_BUILD)
#    define CACHESTORE_EXPORT __declspec(dllexport)
#  else
#    define CACHESTORE_EXPORT
#  endif
#else
#  define CACHESTORE_EXPORT __attribute__((visibility("default")))
#endif

#endif /* CACHESTORE_EXPORT_H_ */
